"""``shardsched dev`` end to end, as a user runs it: start, use over HTTP, SIGTERM, nothing left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from conftest import child_env, shardsched_cmd
from shardsched.core import trace_ids
from shardsched.runtime.redis_server import free_port
from traces import OtlpReceiver
from waits import LogWatch, pids_gone, run_event, start_logged


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextmanager
def running_dev(
    tmp_path: Path, port: int, *extra: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str, LogWatch]]:
    """``shardsched dev`` as a user starts it: its watched output and its ready line;
    stopped on the way out if the test left it running."""
    cmd = shardsched_cmd(
        "dev", "--http", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"), *extra
    )
    dev = start_logged(cmd, tmp_path / "dev.log", env={**child_env(), **(env or {})})
    proc = dev.proc
    try:
        line = dev.wait_for_sync("ready", timeout=60)
        yield proc, line, dev
    finally:
        if proc.poll() is None:  # as a user stops it, so it cleans up after itself
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def dev_http(tmp_path: Path, port: int) -> httpx.Client:
    """A client of the dev API with the admin token dev wrote into its data dir."""
    token = (tmp_path / "data" / "token").read_text().strip()
    headers = {"authorization": f"Bearer {token}"}
    return httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10, headers=headers)


def run_once_job(
    http: httpx.Client, command: str, timeout: float = 20, unavailable_s: float = 0
) -> dict:
    """Register a job due at once through the API and wait for its run to succeed; a 503
    (Redis failing over) is tried again, as a client does, for ``unavailable_s``."""
    body = {"name": "dev-job", "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"}}
    deadline = time.monotonic() + unavailable_s
    while True:
        resp = http.post("/api/v1/jobs", json={**body, "command": command})
        if resp.status_code != 503 or time.monotonic() > deadline:
            break
        # paces a retry that ends when the API takes the job: the server's own advice
        time.sleep(min(float(resp.headers.get("retry-after") or 1), 2.0))
    assert resp.status_code == 201, resp.text
    job_id = resp.json()["job_id"]
    event = run_event(http, job_id, {"succeeded", "failed", "dead_letter"}, timeout)
    run = http.get(f"/api/v1/runs/{event['run_id']}").json()
    assert run["state"] == "succeeded", run
    return run


def test_kill_9_of_dev_takes_redis_and_workers_along(tmp_path: Path) -> None:
    port = free_port()
    with running_dev(tmp_path, port) as (proc, _, _):
        with dev_http(tmp_path, port) as http:
            run_once_job(http, "true")
        tree = descendants(proc.pid)
        assert len(tree) >= 2, "expected the embedded redis-server and a worker"
        proc.kill()
        proc.wait()
        pids_gone(tree, timeout=10)  # redis-server gets SIGTERM, then SIGKILL after 5 s
        assert [pid for pid in tree if alive(pid)] == [], "dev's children outlived a kill -9"


@pytest.mark.slow
def test_dev_left_running_serves_and_runs_a_job_after_60s(tmp_path: Path) -> None:
    """The bug this guards: redis-server and the worker were killed 10 s after start."""
    port = free_port()
    with running_dev(tmp_path, port) as (proc, _, _):
        with dev_http(tmp_path, port) as http:
            time.sleep(65)  # waits out a minute with dev idle: the point of the test
            assert proc.poll() is None
            assert http.get("/readyz").status_code == 200
            run = run_once_job(http, "echo still here")
            out = http.get(f"/api/v1/runs/{run['run_id']}/output").json()["output"]
            assert out == "still here\n"
        assert "Received SIGTERM" not in (tmp_path / "data" / "redis.log").read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


@pytest.mark.parametrize("cluster", [0, 3], ids=["one-redis", "cluster-3"])
def test_dev_runs_a_job_and_stops_everything_on_sigterm(tmp_path: Path, cluster: int) -> None:
    port = free_port()
    extra = ["--cluster", str(cluster)] if cluster else []
    with running_dev(tmp_path, port, *extra) as (proc, line, _):
        assert "ready" in line and f"http://127.0.0.1:{port}/api/v1" in line, line
        assert ("redis+cluster://" in line) == bool(cluster), line
        with dev_http(tmp_path, port) as http:
            run = run_once_job(http, "echo dev says hi")
            out = http.get(f"/api/v1/runs/{run['run_id']}/output").json()["output"]
            assert out == "dev says hi\n"
            assert http.get("/readyz").status_code == 200
        tree = descendants(proc.pid)
        assert len(tree) >= 1 + max(cluster, 1), "expected the embedded redis-server(s), a worker"
        aof = list((tmp_path / "data").rglob("appendonlydir"))
        assert len(aof) == max(cluster, 1), "AOF is on in the data dir, on every node"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        survivors = [pid for pid in tree if alive(pid)]
        assert survivors == [], f"left behind: {survivors}"


@pytest.mark.slow  # out of the default run, which stays near 8 min
def test_dev_archives_old_runs_into_its_data_dir(tmp_path: Path) -> None:
    """The default archive is <data-dir>/archive: a finished run past --retention-s leaves
    Redis for it, and still reads back (archived) through the API."""
    port = free_port()
    flags = ("--retention-s", "1", "--retention-every", "0.2")
    with running_dev(tmp_path, port, *flags), dev_http(tmp_path, port) as http:
        run = run_once_job(http, "echo kept cold")
        got = wait_for(
            lambda: (r := http.get(f"/api/v1/runs/{run['run_id']}").json())["archived"] and r
        )
        assert got["archived"] is True and got["state"] == "succeeded", got
        out = http.get(f"/api/v1/runs/{run['run_id']}/output").json()
        assert out["output"] == "kept cold\n"
    assert list((tmp_path / "data" / "archive" / "runs").rglob("*.parquet"))


def child_named(root: int, text: str) -> int | None:
    """The pid of ``root``'s descendant whose command line holds ``text``."""
    for pid in descendants(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and alive(pid):
            return pid
    return None


def wait_for(predicate, timeout: float = 20, every: float = 0.1):
    """Poll what only dev's API shows (its children, an archived run): dev's Redis is its
    own, behind a password, and publishes nothing a test could listen to."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(every)  # the poll's pace
    raise AssertionError(f"not within {timeout} s: {predicate}")


def test_dev_starts_again_what_dies_and_status_shows_it(tmp_path: Path) -> None:
    """A worker or the embedded redis-server killed under dev is logged loudly and started
    again with backoff; `status` names each child, its restarts and how it last ended."""
    port = free_port()
    with running_dev(tmp_path, port) as (proc, _, _), dev_http(tmp_path, port) as http:
        for what, name in (("shardsched worker", "dev-worker-1"), ("redis-server", "redis-server")):
            old = child_named(proc.pid, what)
            assert old is not None, what
            os.kill(old, signal.SIGKILL)
            new = wait_for(lambda w=what, o=old: (p := child_named(proc.pid, w)) != o and p)

            def shown(n=name, pid=new):
                try:
                    reply = http.get("/api/v1/status")
                except httpx.HTTPError:
                    return None
                if reply.status_code != 200:
                    return None
                kids = {c["name"]: c for c in reply.json()["supervised"]}
                child = kids.get(n)
                return child if child and child["pid"] == pid else None

            child = wait_for(shown)
            assert child["state"] == "running" and child["restarts"] == 1, child
            assert child["last_exit"] == "signal SIGKILL", child
        run = run_once_job(http, "echo after the restarts")  # both came back to work
        assert run["state"] == "succeeded"
        status = subprocess.run(
            shardsched_cmd("status"), capture_output=True, text=True, cwd=tmp_path,
            env={**child_env(), "SHARDSCHED_API": f"http://127.0.0.1:{port}",
                 "SHARDSCHED_TOKEN": (tmp_path / "data" / "token").read_text().strip()},
        )  # fmt: skip
        assert "dev-worker-1" in status.stdout and "signal SIGKILL" in status.stdout, status
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_dev_keeps_its_secrets_private_and_its_jobs_out_of_the_project(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    with running_dev(tmp_path, port) as (proc, line, _), dev_http(tmp_path, port) as http:
        assert "redis://" not in line, "the ready line shows no password"
        assert data.stat().st_mode & 0o777 == 0o700
        secret = [data / "token", data / "redis-url", data / "redis.conf"]
        secret += list((data / "appendonlydir").iterdir())
        for path in secret:
            assert path.stat().st_mode & 0o777 == 0o600, path
        url = (data / "redis-url").read_text().strip()
        redis_port = url.rsplit(":", 1)[1].split("/")[0]
        anon = subprocess.run(
            ["redis-cli", "-p", redis_port, "SET", "x", "1"], capture_output=True, text=True
        )
        assert "NOAUTH" in anon.stdout + anon.stderr, anon
        assert ":" in url.split("@")[0].removeprefix("redis://"), "the URL carries a password"
        where = tmp_path / "where"
        run_once_job(http, f"pwd > {where}")
        scratch = Path(where.read_text().strip())
        assert scratch != Path.cwd() and data.resolve() not in (scratch, *scratch.parents)
        assert tmp_path.resolve() not in (scratch, *scratch.parents)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not scratch.exists(), "dev removes its scratch directory on the way out"


def test_dev_makes_its_own_data_dir_private_and_leaves_a_shared_one_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from shardsched.dev.run import private_dir

    fresh = private_dir(tmp_path / "new")
    assert fresh.stat().st_mode & 0o777 == 0o700
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    (old / "token").write_text("x")
    (old / "appendonlydir").mkdir()
    assert private_dir(old).stat().st_mode & 0o777 == 0o700  # dev's files only: made private
    shared = tmp_path / "project"
    shared.mkdir(mode=0o755)
    (shared / "README.md").write_text("not dev's")
    with caplog.at_level("WARNING"):
        private_dir(shared)
    assert shared.stat().st_mode & 0o777 == 0o755, "dev changed a directory it does not own"
    assert "open to other users" in caplog.text


def test_dev_prints_a_one_time_login_link_and_one_line_for_a_taken_port(tmp_path: Path) -> None:
    """The console's login link works once (then it asks for the token), and holds a code,
    not the token; a second dev on the same port says so in one line, naming --http."""
    port = free_port()
    with running_dev(tmp_path, port) as (proc, _, _):
        text = (tmp_path / "dev.log").read_text()
        found = re.search(rf"console: (http://127\.0\.0\.1:{port}/ui/login/(\S+))", text)
        assert found, text
        link, code = found.groups()
        token = (tmp_path / "data" / "token").read_text().strip()
        assert token not in text and code != token
        with httpx.Client(timeout=10, follow_redirects=True) as browser:
            first = browser.get(link)  # the redirect to /ui/ with the session cookie
            assert first.status_code == 200 and "shardsched" in first.text
            assert first.history[0].headers["cache-control"] == "no-store"
            assert browser.get(f"http://127.0.0.1:{port}/ui/session").json()["scopes"]
        with httpx.Client(timeout=10) as other:
            again = other.get(link)
            assert again.status_code == 401 and "used already or has expired" in again.text
            assert other.get(f"http://127.0.0.1:{port}/ui/session").status_code == 401
            wrong = other.get(f"http://127.0.0.1:{port}/ui/login/{'x' * 32}")
            assert wrong.status_code == 401
        second = subprocess.run(
            shardsched_cmd("dev", "--http", f"127.0.0.1:{port}", "--data-dir",
                           str(tmp_path / "data2")),
            capture_output=True, text=True, env=child_env(), timeout=120,
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"--http 127.0.0.1:{port}" in lines[0], second.stderr
        assert proc.poll() is None  # the first one is untouched


@pytest.mark.slow  # a failover: ~20 s
def test_dev_on_sentinel_survives_its_primary_killed(tmp_path: Path) -> None:
    """``dev --sentinel``: a primary, a replica and three sentinels; kill -9 the primary
    and the next job runs on the promoted replica, which /readyz names; SIGTERM leaves
    nothing behind."""
    port = free_port()
    with running_dev(tmp_path, port, "--sentinel", "--replicas", "1") as (proc, line, _):
        assert "sentinels" in line and "replicas" in line, line
        tree = descendants(proc.pid)
        with dev_http(tmp_path, port) as http:
            run_once_job(http, "true")
            where = http.get("/readyz").json()["redis"]
            primary = int(re.search(r"127\.0\.0\.1:(\d+)", where)[1])
            (pid,) = [
                p for p in tree
                if f"127.0.0.1:{primary}" in Path(f"/proc/{p}/cmdline").read_text()
            ]  # fmt: skip
            os.kill(pid, signal.SIGKILL)  # until the failover, the API answers 503
            run = run_once_job(http, "echo after the failover", timeout=60, unavailable_s=60)
            out = http.get(f"/api/v1/runs/{run['run_id']}/output").json()["output"]
            assert out == "after the failover\n"
            now = http.get("/readyz").json()["redis"]
            assert "via sentinel" in now and f":{primary}" not in now, now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        survivors = [p for p in tree if alive(p)]
        assert survivors == [], f"left behind: {survivors}"


@pytest.mark.slow  # dev's start and a run: ~10 s
def test_dev_traces_its_node_and_its_workers(tmp_path: Path) -> None:
    """Tracing asked of ``dev`` reaches the node it runs in-process (its fire spans, and the
    roots only the owner makes) as well as its worker processes."""
    receiver = OtlpReceiver()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    port = free_port()
    try:
        with running_dev(tmp_path, port, env=env), dev_http(tmp_path, port) as http:
            run = run_once_job(http, "true")
            trace = trace_ids.trace_id(run["run_id"])

            def spans() -> set[tuple[str, str]]:
                return {(s["service"], s["name"]) for s in receiver.got if s["trace_id"] == trace}

            deadline = time.monotonic() + 30
            want = {
                ("shardsched-node", "shardsched.fire"),
                ("shardsched-worker", "shardsched.attempt"),
            }
            while not want <= spans() and time.monotonic() < deadline:
                time.sleep(0.1)  # polls the receiver's record until the spans are in
            assert want <= spans(), spans()
    finally:
        receiver.close()
