"""The command line: bad input is a one-line message and a non-zero exit, and changes nothing."""

from __future__ import annotations

import subprocess

from conftest import child_env, keyspace, shardsched_cmd
from shardsched.store.scripts import SCRIPTS


def run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shardsched_cmd(*args), capture_output=True, text=True, env=child_env(), timeout=timeout
    )


def test_bad_flags_exit_non_zero_with_a_message() -> None:
    for args, needle in [
        (("node", "--redis", "http://127.0.0.1:1"), "unsupported Redis URL scheme"),
        (("node", "--redis", "redis://127.0.0.1:1", "--shards", "0"), "--shards"),
        (("worker", "--redis", "redis://127.0.0.1:1", "--concurrency", "0"), "--concurrency"),
        (("router",), "--http"),
    ]:
        out = run(*args)
        assert out.returncode != 0, args
        assert needle in out.stderr, (args, out.stderr)


async def test_node_refuses_another_shard_count(redis_server, redis, dep) -> None:
    before = await keyspace(redis, dep.namespace)
    out = run(
        "node",
        "--redis",
        redis_server.url,
        "--namespace",
        dep.namespace,
        "--shards",
        str(dep.n_shards * 2),
        "--no-http",
    )
    assert out.returncode == 2
    assert f"has {dep.n_shards} shards" in out.stderr
    assert await keyspace(redis, dep.namespace) == before


async def test_node_refuses_an_eviction_policy(own_redis_server) -> None:
    port = str(own_redis_server.port)
    subprocess.run(
        ["redis-cli", "-p", port, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        check=True,
        capture_output=True,
    )
    out = run("node", "--redis", own_redis_server.url, "--no-http")
    assert out.returncode == 2
    assert "noeviction" in out.stderr


def test_every_script_has_a_shebang_and_a_header() -> None:
    for name, script in SCRIPTS.items():
        text = script.source.decode()
        shebang = text.split("\n", 1)[0]
        assert shebang == "#!lua" or shebang.startswith("#!lua flags="), name
        header = text.split("]]", 1)[0]
        assert "KEYS[1]" in header and "Returns" in header, name
        assert "local rcall = redis.call" in text, name
