"""Test helper: raw-socket clients that misbehave the way attackers and broken proxies do.

Each case is bytes to send (a request line, headers and a body, some of them truncated,
garbage, contradictory or stalled) and a way to leave: half-close and read, half-close
and go, reset (SO_LINGER 0), stall then close, read a little then reset; over TLS also a
close_notify mid-body, and handshakes that are aborted, garbage or silent. schemathesis
only sends well-formed HTTP; this sends what it never would.
"""

from __future__ import annotations

import random
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

JOB = b'{"name":"fz","schedule":{"type":"interval","every_s":60},"command":"true"}'
PATHS = (
    b"/api/v1/jobs",
    b"/api/v1/dags",
    b"/api/v1/tokens",
    b"/api/v1/jobs/fz/trigger",
    b"/api/v1/events?since=0001-01-01T00:00:00Z",
    b"/api/v1/events/stream",
    b"/api/v1/runs/fz:1:1/output/stream",
    b"/internal/v1/claim",
    b"/api/v1/notifications/channels/fz",
    b"/api/v1/notifications/rules",
    b"/api/v1/notifications/alerts",
    b"/api/v1/notifications/deliveries?limit=5",
    b"/api/v1/calendars/fz",
    b"/api/v1/schedules/preview",
    b"/api/v1/hooks/fz",
    b"/api/v1/events/fz.event",
    b"/api/v1/events/received",
    b"/healthz",
    b"/readyz",
    b"/metrics",
)
METHODS = (b"GET", b"POST", b"PUT", b"DELETE", b"PATCH", b"HEAD", b"OPTIONS")
ENDINGS = ("halfclose_read", "halfclose_go", "reset", "close", "stall_close", "read_reset")


@dataclass(frozen=True)
class Case:
    data: bytes
    ending: str
    split: bool  #: sent in two writes, a little apart


def _junk(rng: random.Random, most: int) -> bytes:
    return rng.randbytes(rng.randrange(1, most))


CT = b"Content-Type: application/json\r\n"
CHUNKED = (
    b"5\r\nab",
    b"zz\r\n",
    b"ffffffffffffffff\r\nx",
    b"3\r\nabc\r\n0\r\n",
    b'4;x=y\r\n{"a\r\n',
    b"-1\r\n",
    b"0\r\nTrailer: x\r\n",
    b"2\r\n{}\r\n0\r\n\r\n",
)
CONTRADICTIONS = (
    b"Content-Length: 5\r\nContent-Length: 7\r\n\r\nabcde",
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    b"Content-Length: -3\r\n\r\nabc",
    b"Content-Length: 1e3\r\n\r\n",
)
BAD_HEADERS = (b"X-A: b", b"\xff\xfe: \x00\r\n\r\n", b": novalue\r\n\r\n", b"X\r\n\r\n")
BAD_LINES = (
    b"GET / HTTP/9.9\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    b"\r\n\r\n\r\n",
    b"GET http://[::1 HTTP/1.1\r\n\r\n",
)
H2C = (
    b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
    b"HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"
)
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _h2(rng: random.Random, token: str) -> bytes:
    """An HTTP/2 client's opening, made by the ``h2`` library: a zero (or tiny) initial
    window, then many requests, SETTINGS or PING floods, or streams opened and reset."""
    import h2.config
    import h2.connection
    import h2.settings

    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: rng.choice([0, 1])})
    headers = [(":method", "GET"), (":path", rng.choice(PATHS).decode()), (":scheme", "http"),
               (":authority", "127.0.0.1"), ("authorization", f"Bearer {token}")]  # fmt: skip
    for _ in range(rng.choice([1, 10, 100])):
        what = rng.randrange(4)
        if what == 0:
            conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100})
        elif what == 1:
            conn.ping(rng.randbytes(8))
        else:
            sid = conn.get_next_available_stream_id()
            conn.send_headers(sid, headers, end_stream=True)
            if what == 3:
                conn.reset_stream(sid)
    return conn.data_to_send()


def _length(n: int) -> bytes:
    return CT + b"Content-Length: %d\r\n\r\n" % n


def _request(rng: random.Random, token: str) -> bytes:
    auth = rng.choice([b"", b"Authorization: Bearer " + token.encode(), b"Authorization: x"])
    line = rng.choice(METHODS) + b" " + rng.choice(PATHS) + b" HTTP/1.1\r\n"
    head = line + b"Host: 127.0.0.1\r\n" + (auth + b"\r\n" if auth else b"")
    kind = rng.randrange(13)
    if kind == 0:  # a Content-Length larger than the body
        extra = rng.choice([1, 100, 10**6, 10**12])
        return head + _length(len(JOB) + extra) + JOB[: rng.randrange(len(JOB))]
    if kind == 1:  # chunked bodies, truncated or malformed
        return head + CT + b"Transfer-Encoding: chunked\r\n\r\n" + rng.choice(CHUNKED)
    if kind == 2:  # garbage
        return _junk(rng, 400)
    if kind == 3:  # a whole request cut anywhere
        full = head + _length(len(JOB)) + JOB
        return full[: rng.randrange(1, len(full))]
    if kind == 4:  # NULs, control bytes and huge headers
        huge = b"X: " + b"a" * rng.choice([10, 20000, 70000]) + b"\r\n\r\n"
        return head.replace(b" HTTP", b"\x00\x01 HTTP") + huge
    if kind == 5:  # an HTTP/2 preface and junk frames
        return b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _junk(rng, 120)
    if kind == 6:  # an h2c upgrade, then junk
        return head + H2C + _junk(rng, 80)
    if kind == 7:  # contradictory lengths
        return head + rng.choice(CONTRADICTIONS)
    if kind == 8:  # pipelined requests, the last one left hanging
        return HEALTHZ * rng.randrange(1, 6) + head + _length(500) + b"{"
    if kind == 9:  # a header line with no end, or bytes that are not a header
        return head + rng.choice(BAD_HEADERS)
    if kind == 10:  # a bad version or request line
        return rng.choice(BAD_LINES)
    if kind == 11:  # HTTP/2 from a real HTTP/2 stack: zero windows, floods, resets
        return _h2(rng, token)
    # a well-formed request with a JSON body, left the bad way
    return head + _length(len(JOB)) + JOB


def cases(seed: int, token: str) -> Iterator[Case]:
    rng = random.Random(seed)
    while True:
        yield Case(_request(rng, token), rng.choice(ENDINGS), rng.random() < 0.3)


def play(port: int, case: Case, tls: ssl.SSLContext | None = None, stall_s: float = 0.2) -> None:
    """One case against 127.0.0.1:``port``; every socket error is the client's business."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock: socket.socket = raw
    try:
        if tls is not None:
            sock = tls.wrap_socket(raw, server_hostname="localhost")
        data = case.data
        if case.split and len(data) > 2:
            sock.sendall(data[: len(data) // 2])
            time.sleep(0.005)  # the attack's shape: the request in two TCP segments
            sock.sendall(data[len(data) // 2 :])
        else:
            sock.sendall(data)
        _leave(raw, sock, case.ending, tls is not None, stall_s)
    except (OSError, ssl.SSLError, ValueError):
        pass
    finally:
        for s in (sock, raw):
            try:
                s.close()
            except OSError:
                pass


def _leave(raw: socket.socket, sock: socket.socket, ending: str, tls: bool, stall_s: float) -> None:
    if ending in ("halfclose_read", "halfclose_go"):
        if tls and isinstance(sock, ssl.SSLSocket):
            sock = sock.unwrap()  # close_notify mid-body
        sock.shutdown(socket.SHUT_WR)
        if ending == "halfclose_read":
            sock.settimeout(1)
            while sock.recv(65536):
                pass
    elif ending == "reset":
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    elif ending == "stall_close":
        time.sleep(stall_s)  # the attack's shape: a client that stalls, then closes
    elif ending == "read_reset":
        sock.settimeout(0.1)
        try:
            sock.recv(16)
        except (OSError, ssl.SSLError):
            pass
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def bad_handshake(port: int, rng: random.Random, tls: ssl.SSLContext) -> None:
    """A TLS handshake left half-way: a ClientHello cut short, junk instead of one, a
    reset after the ClientHello, or silence for a moment."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        kind = rng.randrange(4)
        if kind == 0 or kind == 2:
            bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
            obj = tls.wrap_bio(bio_in, bio_out, server_hostname="localhost")
            try:
                obj.do_handshake()
            except ssl.SSLWantReadError:
                pass
            hello = bio_out.read()
            raw.sendall(hello[: rng.randrange(1, len(hello))] if kind == 0 else hello)
            if kind == 2:
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif kind == 1:
            raw.sendall(b"\x16\x03\x01" + _junk(rng, 200))
        else:
            time.sleep(0.1)  # the attack's shape: a TLS client that says nothing
    except OSError:
        pass
    finally:
        raw.close()


def healthz(port: int, tls: ssl.SSLContext | None = None, timeout: float = 5) -> bool:
    """Whether GET /healthz answers 200 within ``timeout``."""
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        sock = tls.wrap_socket(raw, server_hostname="localhost") if tls else raw
        with sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        return data.startswith(b"HTTP/1.1 200")
    except (OSError, ssl.SSLError):
        return False


def api_status(port: int, token: str, tls: ssl.SSLContext | None = None) -> int:
    """The status of an authenticated GET /api/v1/jobs (0 when none came back): a process
    whose /healthz answers may still have lost its in-flight slots to a client."""
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock = tls.wrap_socket(raw, server_hostname="localhost") if tls else raw
        with sock:
            sock.sendall(
                b"GET /api/v1/jobs?limit=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                b"Authorization: Bearer " + token.encode() + b"\r\n\r\n"
            )
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        return int(data[9:12]) if data.startswith(b"HTTP/1.1 ") else 0
    except (OSError, ssl.SSLError, ValueError):
        return 0
