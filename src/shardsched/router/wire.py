"""What hypercorn speaks on the wire, made to fit the API: HTTP/1.1 only, its protocol
errors in the API's JSON error shape.

hypercorn 0.18 (pinned in pyproject.toml) has no switch for either, so both are set on
its protocol classes once, before the first connection (``router.server.serve_http``).
"""

from __future__ import annotations

from typing import Any

#: The body of the 400 hypercorn answers to a request h11 cannot parse (a bad
#: Content-Length, a header with no colon): the API's JSON error shape, not an empty body.
MALFORMED_BODY = (
    b'{"error":{"code":"bad_request","message":"malformed HTTP request: '
    b'the request line or a header could not be parsed"}}'
)


def json_protocol_errors() -> None:
    """Make hypercorn's HTTP/1.1 protocol errors answer in the API's error shape. Its
    ``H11Protocol._send_error_response`` (hypercorn 0.18, pinned) sends the status with an
    empty body; this sends the same status and headers with :data:`MALFORMED_BODY`."""
    import h11
    from hypercorn.protocol.h11 import H11Protocol

    if getattr(H11Protocol, "_shardsched_json_errors", False):
        return

    async def send_error_response(self: Any, status_code: int) -> None:
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(MALFORMED_BODY)).encode()),
            (b"connection", b"close"),
            *self.config.response_headers("h11"),
        ]
        await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
        await self._send_h11_event(h11.Data(data=MALFORMED_BODY))
        await self._send_h11_event(h11.EndOfMessage())

    H11Protocol._send_error_response = send_error_response  # type: ignore[method-assign]
    H11Protocol._shardsched_json_errors = True  # type: ignore[attr-defined]


def _goaway_http_1_1_required() -> bytes:
    """What an HTTP/2 client is sent: the server's connection preface (an empty SETTINGS)
    and a GOAWAY with HTTP_1_1_REQUIRED that takes up none of its streams (RFC 9113
    §5.4.1, §7), made by the ``h2`` library hypercorn already depends on."""
    import h2.config
    import h2.connection
    import h2.errors

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    conn.close_connection(error_code=h2.errors.ErrorCodes.HTTP_1_1_REQUIRED, last_stream_id=0)
    return conn.data_to_send()


def http_1_1_only() -> None:
    """Serve HTTP/1.1 only (docs/security.md, "HTTP/2"). hypercorn 0.18 (pinned) switches a
    connection to HTTP/2 on an ``Upgrade: h2c`` (after answering 101) or on the HTTP/2
    preface. Here the upgrade is ignored, as RFC 9110 §7.8 allows, and the request is
    answered over HTTP/1.1; a client that starts with the preface is sent a GOAWAY with
    HTTP_1_1_REQUIRED and the connection closes before any of its streams reaches the app.
    (With TLS, ALPN offers only ``http/1.1``: ``serve_http``.)"""
    from hypercorn.events import Closed, RawData
    from hypercorn.protocol import ProtocolWrapper
    from hypercorn.protocol.h11 import H2ProtocolAssumedError, H11Protocol

    if getattr(ProtocolWrapper, "_shardsched_http_1_1_only", False):
        return
    goaway = _goaway_http_1_1_required()

    async def check_protocol(self: Any, event: Any) -> None:
        if event.method == b"PRI" and event.target == b"*" and event.http_version == b"2.0":
            raise H2ProtocolAssumedError(b"")

    async def handle(self: Any, event: Any) -> None:
        try:
            await self.protocol.handle(event)
        except H2ProtocolAssumedError:
            await self.send(RawData(data=goaway))
            await self.send(Closed())

    H11Protocol._check_protocol = check_protocol  # type: ignore[method-assign]
    ProtocolWrapper.handle = handle  # type: ignore[method-assign]
    ProtocolWrapper._shardsched_http_1_1_only = True  # type: ignore[attr-defined]
