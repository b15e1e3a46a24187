"""The command line: bad input is a one-line message and a non-zero exit, and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import child_env, keyspace, shardsched_cmd
from shardsched.store.drive import drive_async
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
        (("worker", "--redis", "redis://127.0.0.1:1", "--queues", "gpu,Bad"), "--queues"),
        (("dev", "--queues", "a b"), "--queues"),
        (("router",), "--http"),
        (("status", "--redis", "redis://127.0.0.1:1", "--log-level", "LOUD"), "--log-level"),
        (
            ("--api", "http://127.0.0.1:1", "node", "--redis", "redis://127.0.0.1:1"),
            "--api does not",
        ),
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
        if name.startswith("fenced:"):  # lua/lib/fence.lua, then the script's own header
            text = text.split("]]", 1)[1]
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
    await drive_async(ops.create_jobs(dep, specs), redis)
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
        # the leaf's flags before the command work as well as after it
        env = {**child_env(), "SHARDSCHED_TOKEN": token}
        before = shardsched_cmd("--json", "--api", api, "jobs", "list", "--limit", "3")
        listed = await trio.run_process(before, capture_stdout=True, env=env)
        assert len(json.loads(listed.stdout)["jobs"]) == 3
    finally:
        node.terminate()
        node.wait(timeout=10)


def test_help_imports_no_bench_module() -> None:
    """``shardsched --help`` starts at once: the bench modules (redis-py, pyarrow, …) load
    only for ``shardsched bench``, croniter, trio, YAML and the HTTP stack only for the
    commands that use them."""
    probe = (
        "import sys\n"
        "from shardsched.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('shardsched.bench', 'pyarrow', 'croniter', 'trio', 'yaml', 'starlette')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=child_env(), timeout=20
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("[]"), out.stdout + out.stderr
    assert "bench" in out.stdout  # still listed


def test_durations_and_empty_lists_read_as_people_write_them() -> None:
    from shardsched.cli.render import duration_text, schedule_text, table

    cases = {0.5: "0.5s", 45: "45s", 60: "1m", 1200: "20m", 5400: "1h30m", 86400: "1d"}
    assert {s: duration_text(s) for s in cases} == cases
    assert schedule_text({"type": "interval", "every_s": 86400}) == "every 1d"
    assert table(["JOB_ID", "NAME"], []) == "JOB_ID  NAME\n(none)"


async def test_status_folds_shards_that_read_the_same(node, redis, dep) -> None:
    """64 identical shard rows were one screen of noise: status lists only the shards that
    are off; with --all, consecutive shards that read the same are one row (``0-7``)."""
    from conftest import wait_until
    from shardsched.cli.status import render
    from shardsched.ops.deployment.status import status_view

    async def owned() -> bool:
        st = await drive_async(status_view(dep), redis)
        return not st.unowned and len({s.epoch for s in st.shards}) == 1

    await wait_until(owned, timeout=10)
    last = dep.n_shards - 1

    def shard_column(text: str) -> list[str]:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("SHARD"))
        return [line.split()[0] for line in lines[start + 1 :]]

    quiet = await drive_async(status_view(dep), redis)
    assert shard_column(render(quiet, everything=True)) == [f"0-{last}"]
    assert not [x for x in render(quiet).splitlines() if x.startswith("SHARD ")]
    assert "nothing overdue" in render(quiet)
    await redis.execute("ZADD", dep.shard(2).dead_letter, 1, "job_x:1:1")  # as complete.lua
    st = await drive_async(status_view(dep), redis)
    assert shard_column(render(st, everything=True)) == ["0-1", "2", f"3-{last}"]
    assert shard_column(render(st)) == ["2"]  # only what is off


def test_shell_completion_for_bash_zsh_and_fish(tmp_path) -> None:
    """Each script is what its shell accepts, and completes commands, subcommands and a
    flag's choices (bash and fish asked as the shell asks them)."""
    for shell in ("bash", "zsh", "fish"):
        out = run("completion", shell)
        assert out.returncode == 0, out.stderr
        (tmp_path / shell).write_text(out.stdout)
    bash = subprocess.run(
        [
            "bash",
            "-c",
            f"source {tmp_path / 'bash'}; COMP_WORDS=(shardsched jobs tr); COMP_CWORD=2;"
            " _shtab_shardsched; echo ${COMPREPLY[@]}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert bash.stdout.split() == ["trigger"]
    assert subprocess.run(["zsh", "-n", str(tmp_path / "zsh")], check=False).returncode == 0
    fish = subprocess.run(
        [
            "fish",
            "-c",
            f"source {tmp_path / 'fish'}; complete -C'shardsched jo';"
            " complete -C'shardsched jobs list --status '",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    words = [line.split("\t")[0] for line in fish.stdout.splitlines()]
    assert words == ["jobs", "active", "deleted", "paused"], fish.stdout


def test_config_file_profiles(tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'profile = "dev"\n[profiles.dev]\napi = "http://127.0.0.1:9"\n'
        '[profiles.prod]\napi = "http://127.0.0.2:9"\n'
    )
    env = {**child_env(), "SHARDSCHED_CONFIG": str(config)}

    def jobs(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            shardsched_cmd("jobs", "list", *args), capture_output=True, text=True, env=env
        )

    assert "127.0.0.1:9" in jobs().stderr  # the file's default profile
    assert "127.0.0.2:9" in jobs("--profile", "prod").stderr
    env["SHARDSCHED_PROFILE"] = "prod"
    assert "127.0.0.2:9" in jobs().stderr
    missing = jobs("--profile", "staging")
    assert missing.returncode == 1 and "no profile 'staging'" in missing.stderr
    assert "profiles: dev, prod" in missing.stderr


def test_a_time_flag_takes_now() -> None:
    from datetime import UTC, datetime

    from shardsched.cli.render import ago

    now = datetime.fromisoformat(ago("now") or "")
    assert abs((datetime.now(UTC) - now).total_seconds()) < 5
    assert ago("2030-01-01T00:00:00Z") == "2030-01-01T00:00:00Z"
