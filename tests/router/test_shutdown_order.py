"""A node stops in the order service.py documents: on SIGTERM its readiness answers 503
while it still holds every lease, it accepts no new connection, the request in flight
finishes with its answer (no reset), and only then are the leases handed back and the
process ends."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import trio

from conftest import admin_token, start_api_node, wait_until
from shardsched.store.redis import Redis

JOB = json.dumps(
    {"name": "late", "schedule": {"type": "interval", "every_s": 3600}, "command": "true"}
).encode()


async def read_response(stream: trio.SocketStream) -> tuple[int, bytes]:
    """One HTTP/1.1 response (Content-Length framed): its status and body."""
    data = b""
    with trio.fail_after(15):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some()
            assert chunk, f"connection closed before an answer: {data!r}"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(body) < length:
            chunk = await stream.receive_some()
            assert chunk, "connection closed mid-answer"
            body += chunk
    return int(head.split(b" ", 2)[1]), body


async def owners(redis: Redis, namespace: str, shards: int) -> list[bytes | None]:
    return await redis.pipeline([("GET", f"{namespace}:{{{s}}}:owner") for s in range(shards)])


async def test_sigterm_drains_http_before_the_leases_go(
    redis_server, redis, dep, namespace, tmp_path: Path
) -> None:
    shards = dep.n_shards
    proc, base = start_api_node(redis_server, namespace, tmp_path / "node.log", shards)
    streams: list[trio.SocketStream] = []
    try:
        port = int(base.rsplit(":", 1)[1])
        held = await owners(redis, namespace, shards)
        assert all(held), held
        token = await admin_token(redis, dep)
        # A: a request in flight, its body half sent
        a = await trio.open_tcp_stream("127.0.0.1", port)
        streams.append(a)
        await a.send_all(
            b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(JOB) + JOB[:10]
        )
        # B: a keep-alive connection a load balancer probes readiness on
        b = await trio.open_tcp_stream("127.0.0.1", port)
        streams.append(b)
        probe = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        await b.send_all(probe)
        assert (await read_response(b))[0] == 200
        await trio.sleep(0.3)  # A's headers are in the app before the signal

        proc.send_signal(signal.SIGTERM)

        async def not_ready() -> bytes | None:  # at once, on the connection it already has
            await b.send_all(probe)
            status, body = await read_response(b)
            return body if status == 503 else None

        body = await wait_until(not_ready, timeout=5)
        assert json.loads(body)["stopping"] is True
        assert await owners(redis, namespace, shards) == held, "a lease went before HTTP drained"
        try:  # no new connection is taken
            late = await trio.open_tcp_stream("127.0.0.1", port)
        except OSError:
            pass
        else:
            streams.append(late)
            await late.send_all(probe)
            assert not await late.receive_some(), "a new connection was served while stopping"
        await a.send_all(JOB[10:])  # the request in flight finishes, answered in full
        status, body = await read_response(a)
        assert status == 201, body
        assert await trio.to_thread.run_sync(proc.wait, 15) == 0
        after = await owners(redis, namespace, shards)
        assert not any(after), f"the leases were handed back on the way out: {after}"
    finally:
        for stream in streams:
            await stream.aclose()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
