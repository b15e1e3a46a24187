"""HTTP limits: a stalled body cannot hold a connection, and load sheds with a 503."""

from __future__ import annotations

import socket
import struct

import httpx
import pytest
import trio
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from conftest import admin_token, wait_until
from shardsched.router import sse
from shardsched.router.app import create_app
from shardsched.service import serve_http


async def serve(nursery, app, **limits) -> tuple[str, str, int]:
    """serve_http on a free loopback port with ``limits``; (base URL, host, port)."""
    binds = await nursery.start(
        lambda task_status: serve_http(app, "127.0.0.1:0", task_status=task_status, **limits)
    )
    host, port = binds[0].removeprefix("http://").rsplit(":", 1)
    return binds[0], host, int(port)


async def request_stream(host: str, port: int, token: str) -> trio.SocketStream:
    """A raw connection that has sent GET /api/v1/events/stream with ``token``."""
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(
        b"GET /api/v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + token.encode()
        + b"\r\n\r\n"
    )
    return stream


async def test_a_body_stalled_half_way_is_a_408_and_the_connection_closes(
    nursery, redis, dep
) -> None:
    base, host, port = await serve(nursery, create_app(redis, dep), read_timeout_s=1)
    token = await admin_token(redis, dep)
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(
        b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + token.encode()
        + b'\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na'
    )
    started = trio.current_time()
    answer = b""
    with trio.fail_after(5):
        while chunk := await stream.receive_some(4096):
            answer += chunk
    assert trio.current_time() - started < 4, "the stalled connection was held"
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b'"code":"request_timeout"' in answer
    await stream.aclose()
    # the server still serves
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/healthz")).status_code == 200


async def test_a_half_close_before_the_body_ends_ends_that_connection_only(
    nursery, redis, dep
) -> None:
    """The issue's reproduction: a token, a Content-Length larger than the body, then a
    half-close. It used to raise BusyResourceError out of hypercorn's connection task into
    the server's nursery, ending the process (here: the test's nursery)."""
    base, host, port = await serve(nursery, create_app(redis, dep))
    token = await admin_token(redis, dep)
    request = (
        b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
        + token.encode()
        + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % 1000
        + b'{"name":"x","schedule":{"type":"interval","every_s":60'
    )
    for _ in range(50):
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(request)
        await stream.send_eof()
        with trio.fail_after(5):
            while await stream.receive_some(4096):
                pass
        await stream.aclose()
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/healthz")).status_code == 200


async def test_an_instant_before_1970_in_a_query_is_a_422(http) -> None:
    reply = await http.get("/api/v1/events", params={"since": "0001-01-01T00:00:00Z"})
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["details"]["field"] == "$.since"


async def test_an_event_stream_outlives_the_read_timeout_with_keep_alives(
    nursery, redis, dep, monkeypatch
) -> None:
    """A stream is not a request being read: the read deadline does not cut it (it used to
    end every stream at exactly the read timeout), and comment lines keep it alive."""
    monkeypatch.setattr(sse, "KEEP_ALIVE_S", 0.5)
    _, host, port = await serve(nursery, create_app(redis, dep), read_timeout_s=1)
    token = await admin_token(redis, dep)
    stream = await request_stream(host, port, token)
    received = b""
    with trio.move_on_after(3.5):
        while chunk := await stream.receive_some(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    assert chunk, "the stream ended"
    assert received.count(b": keep-alive") >= 4, received
    await stream.aclose()


async def test_health_and_readiness_answer_past_the_in_flight_cap(nursery, redis, dep) -> None:
    base, _, _ = await serve(nursery, create_app(redis, dep), max_in_flight=0)
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        assert (await http.get("/healthz")).status_code == 200
        ready = await http.get("/readyz")  # 503 here: no node owns the shards
        assert "overloaded" not in ready.text, ready.text
        shed = await http.get("/api/v1/jobs")  # the cap holds elsewhere
        assert shed.json()["error"]["code"] == "overloaded"


async def test_requests_past_the_in_flight_cap_get_503_with_retry_after(nursery) -> None:
    release = trio.Event()
    entered = trio.Event()

    async def slow(request):
        entered.set()
        await release.wait()
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/api/slow", slow)])
    base, _, _ = await serve(nursery, app, max_in_flight=1)
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        results: list[httpx.Response] = []

        async def first() -> None:
            results.append(await http.get("/api/slow"))

        async with trio.open_nursery() as n:
            n.start_soon(first)
            await entered.wait()
            shed = await http.get("/api/slow")
            assert shed.status_code == 503
            assert shed.headers["retry-after"] == "1"
            assert shed.json()["error"]["code"] == "overloaded"
            release.set()
        assert results[0].status_code == 200


async def test_connections_past_the_cap_are_closed_and_the_rest_are_served(
    nursery, redis, dep
) -> None:
    base, host, port = await serve(nursery, create_app(redis, dep), max_connections=3)
    held = [await trio.open_tcp_stream(host, port) for _ in range(3)]
    for stream in held:  # each answered once, so the server holds all three: idle, open
        await stream.send_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        answer = b""
        with trio.fail_after(5):
            while b"\r\n\r\n" not in answer:
                answer += await stream.receive_some(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
    extra = await trio.open_tcp_stream(host, port)
    with trio.fail_after(2):
        assert await extra.receive_some(100) == b"", "the 4th connection is closed at once"
    await extra.aclose()
    for stream in held:
        await stream.aclose()
    started = trio.current_time()
    async with httpx.AsyncClient(base_url=base) as http:  # slots are free again

        async def served() -> bool:
            try:
                return (await http.get("/healthz")).status_code == 200
            except httpx.RemoteProtocolError:
                return False

        await wait_until(served, timeout=10)
    print(f"slots free again after {trio.current_time() - started:.2f} s")


async def open_stream(host: str, port: int, token: str) -> tuple[trio.SocketStream, bytes]:
    """GET the event stream with ``token``; the stream and the answer's first bytes."""
    stream = await request_stream(host, port, token)
    head = b""
    with trio.fail_after(5):
        while b"\r\n\r\n" not in head or (b" 200 " not in head and not head.endswith(b"}}")):
            head += await stream.receive_some(4096)
    return stream, head


async def test_open_streams_are_capped_per_token_and_in_all(
    nursery, redis, dep, monkeypatch
) -> None:
    monkeypatch.setattr(sse, "STREAMS_TOTAL", 20)
    _, host, port = await serve(nursery, create_app(redis, dep))
    one = await admin_token(redis, dep, "streamer-1")
    two = await admin_token(redis, dep, "streamer-2")
    held = []
    for _ in range(sse.STREAMS_PER_TOKEN):
        stream, head = await open_stream(host, port, one)
        assert head.startswith(b"HTTP/1.1 200"), head
        held.append(stream)
    stream, head = await open_stream(host, port, one)  # one past the token's cap
    assert head.startswith(b"HTTP/1.1 429"), head
    assert b'"code":"too_many_streams"' in head
    await stream.aclose()
    for _ in range(4):  # another token still gets its own, up to the total
        stream, head = await open_stream(host, port, two)
        assert head.startswith(b"HTTP/1.1 200"), head
        held.append(stream)
    stream, head = await open_stream(host, port, two)  # past the total
    assert head.startswith(b"HTTP/1.1 429"), head
    await stream.aclose()
    await held.pop(0).aclose()  # a stream that ends gives its slot back

    async def given_back() -> bool:
        stream, head = await open_stream(host, port, one)
        await stream.aclose()
        return head.startswith(b"HTTP/1.1 200")

    await wait_until(given_back, timeout=5)
    for stream in held:
        await stream.aclose()


def never_ending_app(entered: list[str], cut: list[float] | None = None) -> Starlette:
    """An app whose handler never looks for its client's disconnect and never returns;
    when the server cuts it, the time is added to ``cut``."""

    async def hang(request):
        entered.append(request.url.path)
        try:
            await trio.sleep_forever()
        finally:
            if cut is not None:
                cut.append(trio.current_time())

    return Starlette(routes=[Route("/api/hang", hang), Route("/docs/hang", hang)])


def count_is(entered: list[str], n: int):
    async def check() -> bool:
        return len(entered) == n

    return check


async def in_flight_answers(base: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        return await http.get("/api/hang", timeout=0.5)


@pytest.mark.parametrize("leave", ["reset", "close", "half_close"])
async def test_a_request_in_the_app_gives_its_slot_back_when_its_connection_ends(
    nursery, leave
) -> None:
    """In-flight slots are held by a connection's lifetime, never longer: a handler that
    would run for ever is cut once its client reset the connection (1 s), or once the
    write timeout passed after a close or a half-close (a FIN is the same for both)."""
    entered: list[str] = []
    cut: list[float] = []
    base, host, port = await serve(
        nursery, never_ending_app(entered, cut), max_in_flight=1, write_timeout_s=2
    )
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(b"GET /api/hang HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await wait_until(count_is(entered, 1), timeout=5)
    assert (await in_flight_answers(base)).status_code == 503  # the one slot is held ...
    started = trio.current_time()
    if leave == "reset":
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()
    elif leave == "close":
        await stream.aclose()
    else:
        await stream.send_eof()

    async def slot_free() -> bool:
        try:
            await in_flight_answers(base)
        except httpx.TimeoutException:
            return True  # in the app again: the slot was free
        return False  # 503: still held

    await wait_until(slot_free, timeout=10)
    took = cut[0] - started  # when the server cut the handler, not when a poll saw it
    print(f"{leave}: slot back after {took:.2f} s")
    assert took < (2.5 if leave == "reset" else 4)  # a FIN looks like a half-close
    if leave == "half_close":
        await stream.aclose()


async def stalled_download(host: str, port: int, source: str) -> trio.SocketStream:
    """A GET of Swagger UI's 1.4 MB bundle from ``source`` with a 4 KiB receive buffer,
    never read."""
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.bind((source, 0))
    await sock.connect((host, port))
    stream = trio.SocketStream(sock)
    await stream.send_all(b"GET /docs/swagger-ui-bundle.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return stream


async def test_stalled_downloads_of_open_routes_leave_the_api_its_slots(
    nursery, redis, dep
) -> None:
    """The issue's attack: 300 unauthenticated stalled downloads of /docs used to take the
    256 in-flight slots authenticated calls need, for 30 s. Open routes have a budget of
    their own, and one client address holds at most OPEN_PER_CLIENT of it."""
    base, host, port = await serve(nursery, create_app(redis, dep), write_timeout_s=60)
    token = await admin_token(redis, dep)
    sources = [f"127.0.0.{i}" for i in range(2, 12)]
    stalled = [await stalled_download(host, port, src) for src in sources for _ in range(30)]
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:

        async def open_budget_full() -> bool:
            reply = await http.get("/openapi.json")
            return reply.status_code == 503

        await wait_until(open_budget_full, timeout=10)  # the stall did hold the open slots
        for _ in range(20):
            api = await http.get("/api/v1/jobs", headers={"Authorization": f"Bearer {token}"})
            assert api.status_code == 200, api.text
        assert (await http.get("/healthz")).status_code == 200
    # one address got its share and no more; a client elsewhere is not starved by them
    fresh = await stalled_download(host, port, "127.0.0.99")
    head = b""
    with trio.fail_after(5):
        while b"\r\n\r\n" not in head:
            head += await fresh.receive_some(4096)
    assert head.startswith(b"HTTP/1.1 503"), head[:100]  # budget of 64 taken by 4 addresses
    for stream in [*stalled, fresh]:
        stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:

        async def docs_again() -> bool:
            return (await http.get("/openapi.json")).status_code == 200

        await wait_until(docs_again, timeout=5)  # the slots came back with the connections


async def test_one_client_address_holds_at_most_its_share_of_the_open_budget(
    nursery,
) -> None:
    entered: list[str] = []
    _, host, port = await serve(nursery, never_ending_app(entered), open_per_client=3)
    held = []
    for _ in range(5):
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(b"GET /docs/hang HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        held.append(stream)
    await wait_until(count_is(entered, 3), timeout=5)
    answers = []
    for stream in held[3:]:
        head = b""
        with trio.fail_after(5):
            while b"\r\n\r\n" not in head:
                head += await stream.receive_some(4096)
        answers.append(head.split(b"\r\n")[0])
    assert answers == [b"HTTP/1.1 503 "] * 2, answers
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.7", 0))
    await sock.connect((host, port))
    other = trio.SocketStream(sock)  # another address still gets in
    await other.send_all(b"GET /docs/hang HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await wait_until(count_is(entered, 4), timeout=5)
    for stream in [*held, other]:
        await stream.aclose()
