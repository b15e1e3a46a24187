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
        (("status", "--redis", "redis://127.0.0.1:1", "--log-level", "LOUD"), "--log-level"),
    ]:
        out = run(*args)
        assert out.returncode != 0, args
        assert needle in out.stderr, (args, out.stderr)


def test_version() -> None:
    from shardsched._version import __version__

    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"shardsched {__version__}"


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


async def test_output_cut_short_by_its_reader_ends_quietly(
    redis_server, redis, dep, tmp_path
) -> None:
    """``shardsched jobs list --json | head -1``: no BrokenPipe traceback, exit 141."""
    import trio

    from conftest import admin_token, start_api_node
    from shardsched import ops
    from shardsched.core.instants import from_ms
    from shardsched.core.models import JobSpec, OnceSchedule

    later = OnceSchedule(at=from_ms(4_102_444_800_000))  # 2100: never fires here
    specs = [JobSpec(name=f"listed-{i}", command="true", schedule=later) for i in range(500)]
    await ops.drive_async(ops.create_jobs(dep, specs), redis)
    token = await admin_token(redis, dep)
    node, api = start_api_node(redis_server, dep.namespace, tmp_path / "node.log", dep.n_shards)
    try:
        for args in (("--json",), ()):
            cmd = shardsched_cmd("jobs", "list", "--limit", "500", "--api", api, *args)

            def piped(cmd: list[str] = cmd) -> tuple[int, str]:
                import fcntl
                import os

                env = {**child_env(), "SHARDSCHED_TOKEN": token}
                read_end, write_end = os.pipe()
                fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # smaller than the output
                lister = subprocess.Popen(cmd, stdout=write_end, stderr=subprocess.PIPE, env=env)
                os.close(write_end)
                with os.fdopen(read_end, "rb") as reader:
                    reader.readline()  # then the reader goes away, as head does
                assert lister.stderr is not None
                with lister.stderr:
                    err = lister.stderr.read().decode()
                return lister.wait(timeout=20), err

            code, err = await trio.to_thread.run_sync(piped)
            assert "Traceback" not in err and "BrokenPipe" not in err, err
            assert code == 141, (code, err)
    finally:
        node.terminate()
        node.wait(timeout=10)
