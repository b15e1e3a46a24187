"""HTTP/2 is not served (docs/security.md, "HTTP/2"): the API speaks HTTP/1.1 only.

An anonymous client could once make every API route answer 503 until a restart: three h2c
connections with SETTINGS_INITIAL_WINDOW_SIZE=0, a hundred GET /openapi.json on each, then
close. The responses could never be sent, so their in-flight slots were never given back.
Now an HTTP/2 client gets a GOAWAY with HTTP_1_1_REQUIRED (RFC 9113 §5.4.1) before any of
its streams reaches the app; an ``Upgrade: h2c`` is ignored (RFC 9110 §7.8) and answered
over HTTP/1.1; TLS offers only ``http/1.1`` by ALPN. These tests speak HTTP/2 with the
``h2`` library (a real HTTP/2 stack, not hand-written frames) over raw sockets.
"""

from __future__ import annotations

import ssl

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import httpx
import pytest
import trio

from conftest import admin_token
from shardsched.router.app import create_app
from shardsched.router.server import TlsFiles
from shardsched.service import serve_http


async def serve(nursery, app, **options) -> tuple[str, int]:
    binds = await nursery.start(
        lambda task_status: serve_http(app, "127.0.0.1:0", task_status=task_status, **options)
    )
    url = binds[0]
    return url, int(url.rsplit(":", 1)[1])


def h2_client(window: int | None = None) -> h2.connection.H2Connection:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    return conn


def get(conn: h2.connection.H2Connection, path: str, token: str = "") -> int:
    sid = conn.get_next_available_stream_id()
    headers = [(":method", "GET"), (":path", path), (":scheme", "http"),
               (":authority", "127.0.0.1")]  # fmt: skip
    if token:
        headers.append(("authorization", f"Bearer {token}"))
    conn.send_headers(sid, headers, end_stream=True)
    return sid


async def h2_events(stream: trio.abc.Stream, conn: h2.connection.H2Connection) -> list:
    """Everything the server answers until it closes the connection (5 s at most)."""
    seen: list = []
    with trio.move_on_after(5):
        while True:
            try:
                data = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                break
            if not data:
                break
            try:
                seen += conn.receive_data(data)
            except h2.exceptions.ProtocolError as exc:  # what is not HTTP/2 at all
                seen.append(exc)
                break
    return seen


def goaway(events: list) -> h2.events.ConnectionTerminated:
    ended = [e for e in events if isinstance(e, h2.events.ConnectionTerminated)]
    kinds = sorted({type(e).__name__ for e in events})
    assert ended, f"no GOAWAY among {len(events)} events: {kinds}"
    return ended[0]


async def api_answers(base: str, token: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        return await http.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"})


async def test_zero_window_h2c_streams_abandoned_leave_the_api_serving(nursery, redis, dep) -> None:
    """The attack as it was reported: 3 x (window 0, 100 x GET /openapi.json, close)."""
    token = await admin_token(redis, dep)
    base, port = await serve(nursery, create_app(redis, dep), max_in_flight=64)
    for _ in range(3):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        conn = h2_client(window=0)
        for _ in range(100):
            get(conn, "/openapi.json")
        await stream.send_all(conn.data_to_send())
        ended = goaway(await h2_events(stream, conn))
        assert ended.error_code == h2.errors.ErrorCodes.HTTP_1_1_REQUIRED
        assert ended.last_stream_id == 0, "no stream of it was taken up"
        await stream.aclose()
    answer = await api_answers(base, token)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "abuse",
    ["settings_flood", "ping_flood", "reset_streams", "window_update_only", "junk_frames"],
)
async def test_h2_abuse_is_refused_and_costs_nothing(nursery, redis, dep, abuse) -> None:
    token = await admin_token(redis, dep)
    base, port = await serve(nursery, create_app(redis, dep), max_in_flight=8)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    conn = h2_client()
    if abuse == "settings_flood":
        for i in range(2000):
            conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100 + i})
    elif abuse == "ping_flood":
        for i in range(2000):
            conn.ping(i.to_bytes(8, "big"))
    elif abuse == "reset_streams":  # a "rapid reset": open and cancel, over and over
        for _ in range(500):
            sid = get(conn, "/api/v1/jobs", token)
            conn.reset_stream(sid)
    elif abuse == "window_update_only":
        for _ in range(500):
            conn.increment_flow_control_window(1)
    await stream.send_all(
        conn.data_to_send()
        + (b"\x00\x00\x05\xff\x00\x00\x00\x00\x01junk" if abuse == "junk_frames" else b"")
    )
    ended = goaway(await h2_events(stream, conn))
    assert ended.error_code == h2.errors.ErrorCodes.HTTP_1_1_REQUIRED
    await stream.aclose()
    for _ in range(10):  # every slot is there: more requests than max_in_flight, in turn
        assert (await api_answers(base, token)).status_code == 200


async def test_an_h2c_upgrade_is_answered_over_http_1_1(nursery, redis, dep) -> None:
    token = await admin_token(redis, dep)
    _, port = await serve(nursery, create_app(redis, dep))
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(
        b"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + token.encode()
        + b"\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        b"HTTP2-Settings: AAMAAABkAAQAAAAAAAIAAAAA\r\n\r\n"
    )
    answer = b""
    with trio.fail_after(5):
        while b"\r\n\r\n" not in answer:
            answer += await stream.receive_some(4096)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert b"101" not in answer.split(b"\r\n")[0]
    await stream.aclose()


async def test_https_offers_only_http_1_1_by_alpn(nursery, redis, dep, cert) -> None:
    token = await admin_token(redis, dep)
    certfile, keyfile = cert
    _, port = await serve(
        nursery, create_app(redis, dep), tls=TlsFiles(str(certfile), str(keyfile))
    )
    client = ssl.create_default_context(cafile=str(certfile))
    client.set_alpn_protocols(["h2", "http/1.1"])
    raw = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(raw, client, server_hostname="localhost")
    await stream.do_handshake()
    assert stream.selected_alpn_protocol() == "http/1.1"
    await stream.aclose()
    # a client that offers only h2 is told so (no protocol in common), and nothing breaks
    only_h2 = ssl.create_default_context(cafile=str(certfile))
    only_h2.set_alpn_protocols(["h2"])
    raw = await trio.open_tcp_stream("127.0.0.1", port)
    stream = trio.SSLStream(raw, only_h2, server_hostname="localhost")
    try:
        await stream.do_handshake()
        conn = h2_client(window=0)
        get(conn, "/openapi.json")
        await stream.send_all(conn.data_to_send())
        assert goaway(await h2_events(stream, conn)).error_code == (
            h2.errors.ErrorCodes.HTTP_1_1_REQUIRED
        )
    except (trio.BrokenResourceError, ssl.SSLError):
        pass  # refused during the handshake: no application protocol in common
    finally:
        await trio.aclose_forcefully(stream)
    async with httpx.AsyncClient(verify=client, timeout=10) as http:
        answer = await http.get(
            f"https://localhost:{port}/api/v1/jobs", headers={"Authorization": f"Bearer {token}"}
        )
    assert answer.status_code == 200 and answer.http_version == "HTTP/1.1"
