"""HTTP limits: a stalled body cannot hold a connection, and load sheds with a 503."""

from __future__ import annotations

import httpx
import trio
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from shardsched.router.app import create_app
from shardsched.service import serve_http


async def serve(nursery, app, **limits) -> tuple[str, str, int]:
    """serve_http on a free loopback port with ``limits``; (base URL, host, port)."""
    binds = await nursery.start(
        lambda task_status: serve_http(app, "127.0.0.1:0", task_status=task_status, **limits)
    )
    host, port = binds[0].removeprefix("http://").rsplit(":", 1)
    return binds[0], host, int(port)


async def test_a_body_stalled_half_way_is_closed_after_the_read_timeout(
    nursery, redis, dep
) -> None:
    base, host, port = await serve(nursery, create_app(redis, dep), read_timeout_s=1)
    stream = await trio.open_tcp_stream(host, port)
    await stream.send_all(
        b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na'
    )
    started = trio.current_time()
    with trio.fail_after(5):
        while await stream.receive_some(4096):
            pass  # whatever the server says before it closes
    assert trio.current_time() - started < 4, "the stalled connection was held"
    await stream.aclose()
    # the server still serves
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/healthz")).status_code == 200


async def test_requests_past_the_in_flight_cap_get_503_with_retry_after(nursery) -> None:
    release = trio.Event()
    entered = trio.Event()

    async def slow(request):
        entered.set()
        await release.wait()
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/slow", slow)])
    base, _, _ = await serve(nursery, app, max_in_flight=1)
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        results: list[httpx.Response] = []

        async def first() -> None:
            results.append(await http.get("/slow"))

        async with trio.open_nursery() as n:
            n.start_soon(first)
            await entered.wait()
            shed = await http.get("/slow")
            assert shed.status_code == 503
            assert shed.headers["retry-after"] == "1"
            assert shed.json()["error"]["code"] == "overloaded"
            release.set()
        assert results[0].status_code == 200


async def test_connections_past_the_cap_are_closed_and_the_rest_are_served(
    nursery, redis, dep
) -> None:
    base, host, port = await serve(nursery, create_app(redis, dep), max_connections=3)
    held = [await trio.open_tcp_stream(host, port) for _ in range(3)]  # idle, open
    await trio.sleep(0.2)  # the server accepts the three before the fourth knocks
    extra = await trio.open_tcp_stream(host, port)
    with trio.fail_after(2):
        assert await extra.receive_some(100) == b"", "the 4th connection is closed at once"
    await extra.aclose()
    for stream in held:
        await stream.aclose()
    started = trio.current_time()
    async with httpx.AsyncClient(base_url=base) as http:  # slots are free again
        with trio.fail_after(10):
            while True:
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.RemoteProtocolError:
                    await trio.sleep(0.1)
    print(f"slots free again after {trio.current_time() - started:.2f} s")
