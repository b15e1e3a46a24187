"""The trio RESP client: pipelining, URL auth/db, cancellation, reconnects, FUNCTION FLUSH."""

from __future__ import annotations

import subprocess

import hiredis
import pytest
import trio

from conftest import RedisServer
from shardsched.store.redis import Redis, RedisConnectionError, RedisURL, ReplyError
from shardsched.store.redis.errors import RedisRefusedError


def test_url_parsing() -> None:
    assert RedisURL.parse("redis://127.0.0.1:7000/2") == RedisURL("127.0.0.1", 7000, None, None, 2)
    assert RedisURL.parse("redis://alice:p%40ss@localhost:6380") == RedisURL(
        "localhost", 6380, "alice", "p@ss", 0
    )
    assert RedisURL.parse("redis://:secret@h").password == "secret"
    with pytest.raises(ValueError):
        RedisURL.parse("http://localhost:6379")


async def test_replies_keep_order_and_errors_in_place(redis, namespace) -> None:
    key = f"{namespace}:k"
    replies = await redis.replies([("SET", key, "v"), ("INCR", key), ("GET", key), ("DEL", key)])
    assert replies[0] == b"OK"
    assert isinstance(replies[1], hiredis.ReplyError)
    assert replies[2:] == [b"v", 1]
    with pytest.raises(ReplyError):
        await redis.execute("INCR", "a", "b", "c")


async def test_a_pipeline_raises_for_an_error_reply(redis, namespace) -> None:
    """What a process sends as a pipeline is checked in store/: an error reply raises (a
    RedisError its loops wait out), never reaches a caller as data."""
    key, other = f"{namespace}:k", f"{namespace}:k2"
    with pytest.raises(ReplyError, match="not an integer"):
        await redis.pipeline([("SET", key, "v"), ("INCR", key), ("SET", other, "w")])
    assert await redis.pipeline([("GET", key), ("GET", other)]) == [b"v", b"w"]  # all ran


async def test_auth_user_password_and_db_from_url(own_redis_server: RedisServer) -> None:
    port = own_redis_server.port
    cli = ["redis-cli", "-p", str(port)]
    subprocess.run(
        [*cli, "ACL", "SETUSER", "alice", "on", ">wonder land", "~*", "+@all"], check=True
    )
    subprocess.run([*cli, "CONFIG", "SET", "requirepass", "s3cret"], check=True)
    client = Redis(f"redis://alice:wonder%20land@127.0.0.1:{port}/3", size=1)
    try:
        await client.execute("SET", "where", "db3")
        assert await client.execute("ACL", "WHOAMI") == b"alice"
    finally:
        await client.aclose()
    out = subprocess.run(
        [*cli, "-a", "s3cret", "--no-auth-warning", "-n", "3", "GET", "where"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "db3"
    wrong = Redis(f"redis://:wrong@127.0.0.1:{port}", size=1, retry_for=0.2)
    # refused at the handshake: a connection error (retried, loud), saying what to do
    with pytest.raises(RedisRefusedError, match="password in the Redis URL is wrong"):
        await wrong.execute("PING")


async def test_unreachable_server_fails_after_retrying() -> None:
    from shardsched.runtime.redis_server import free_port

    client = Redis(f"redis://127.0.0.1:{free_port()}", size=1, connect_timeout=0.2, retry_for=0.5)
    start = trio.current_time()
    with pytest.raises(RedisConnectionError):
        await client.execute("PING")
    assert 0.3 <= trio.current_time() - start < 5


async def test_cancelled_call_never_leaves_a_reply_for_the_next_caller(
    redis_server, namespace
) -> None:
    client = Redis(redis_server.url, size=1)  # one connection: any reuse is the same socket
    key = f"{namespace}:list"
    try:
        with trio.move_on_after(0.2):
            await client.execute("BLPOP", key, 1)
        pusher = Redis(redis_server.url, size=1)
        await pusher.execute("RPUSH", key, "late")
        await pusher.aclose()
        await trio.sleep(0.05)  # waits out the late reply's way onto the cancelled socket
        # Had the cancelled BLPOP's connection been reused, this would read its reply.
        assert await client.execute("ECHO", "mine") == b"mine"
        assert await client.execute("LRANGE", key, 0, -1) in ([b"late"], [])
    finally:
        await client.aclose()


async def test_reconnects_after_redis_restart(own_redis_server: RedisServer) -> None:
    client = Redis(own_redis_server.url, size=2, retry_for=15)
    try:
        await client.execute("SET", "survives", "yes")
        own_redis_server.kill()
        with pytest.raises(RedisConnectionError):
            await client.execute("PING")  # the pooled connection is dead
        own_redis_server.start()  # same port, same AOF
        assert await client.execute("GET", "survives") == b"yes"
    finally:
        await client.aclose()


async def test_a_function_lost_to_a_flush_is_loaded_again(redis, namespace) -> None:
    keys = (f"{namespace}:{{0}}:owner", f"{namespace}:{{0}}:epoch")
    assert (await redis.script("acquire_lease", keys, ("n1", 1000)))[0] == 1
    await redis.execute("FUNCTION", "FLUSH")
    assert (await redis.script("acquire_lease", keys, ("n1", 1000)))[0] == 2


async def test_subscribe_yields_none_then_messages(redis, namespace) -> None:
    channel = f"{namespace}:chan"
    got: list[bytes | None] = []
    subscribed = trio.Event()
    async with trio.open_nursery() as nursery:

        async def listen() -> None:
            async for msg in redis.subscribe(channel):
                got.append(msg)
                subscribed.set()
                if len(got) == 2:
                    nursery.cancel_scope.cancel()

        nursery.start_soon(listen)
        with trio.fail_after(5):
            await subscribed.wait()
            await redis.execute("PUBLISH", channel, "7")
            await trio.sleep_forever()
    assert got == [None, b"7"]
