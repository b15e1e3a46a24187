"""The event stream of run transitions: written by the scripts that make the
changes, read across shards in order through the API (pages and Server-Sent Events)."""

from __future__ import annotations

import json
import signal
import subprocess
from contextlib import aclosing
from datetime import datetime
from pathlib import Path

import httpx
import trio

from conftest import admin_token, child_env, shardsched_cmd, wait_until
from shardsched.core.access import Scope, TokenRequest
from shardsched.ops.access import tokens
from shardsched.store.drive import drive_async

NOW = {"type": "once", "at": "2020-01-01T00:00:00Z"}
HOURLY = {"type": "interval", "every_s": 3600}


async def all_events(http, **params) -> list[dict]:
    out, cursor = [], None
    while True:
        query = {**params, "limit": params.get("limit", 1000)}
        if cursor:
            query["after"] = cursor
        page = (await http.get("/api/v1/events", params=query)).json()
        out += page["events"]
        if not page["events"]:
            return out
        cursor = page["next_cursor"]


def transitions(events: list[dict], run_id: str) -> list[tuple]:
    return [(e["old"], e["new"]) for e in events if e["run_id"] == run_id]


async def test_every_transition_of_a_run_is_an_event(node, worker, http) -> None:
    ok = await http.post("/api/v1/jobs", json={"name": "ok", "command": "true", "schedule": NOW})
    ok_id = ok.json()["job_id"]
    retry = {"max_attempts": 2, "base_s": 0, "jitter": False}
    bad = {"name": "bad", "command": "exit 3", "schedule": NOW, "retry_policy": retry}
    bad_id = (await http.post("/api/v1/jobs", json=bad)).json()["job_id"]
    dag = {
        "name": "d",
        "schedule": HOURLY,
        "tasks": [
            {"name": "a", "command": "false"},
            {"name": "b", "command": "true", "depends_on": ["a"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
    drid = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()["dag_run_id"]

    async def settled() -> list[dict] | None:
        events = await all_events(http)
        news = {(e["run_id"], e["new"]) for e in events}
        done = (
            (f"{ok_id}:", "succeeded"),
            (f"{bad_id}:", "dead_letter"),
            (drid, "failed"),
        )
        if all(any(r.startswith(p) and n == new for r, n in news) for p, new in done):
            return events
        return None

    events = await wait_until(settled, timeout=20)
    ok_run = next(e["run_id"] for e in events if e["job_id"] == ok_id)
    assert transitions(events, ok_run) == [
        (None, "scheduled"),
        ("scheduled", "running"),
        ("running", "succeeded"),
    ]
    ran = [e for e in events if e["run_id"] == ok_run and e["new"] != "scheduled"]
    assert {e["worker"] for e in ran} == {"test-worker"} and ran[0]["attempt"] == 1
    first, second = sorted({e["run_id"] for e in events if e["job_id"] == bad_id})
    assert transitions(events, first) == [
        (None, "scheduled"),
        ("scheduled", "running"),
        ("running", "failed"),
    ]
    assert transitions(events, second) == [
        (None, "retrying"),
        ("retrying", "scheduled"),
        ("scheduled", "running"),
        ("running", "dead_letter"),
    ]
    assert [e["detail"] for e in events if e["run_id"] == first and e["new"] == "failed"] == [
        "exit 3"
    ]
    assert transitions(events, drid) == [
        (None, "queued"),
        ("queued", "running"),
        ("running", "failed"),
    ]
    task_b = next(e for e in events if e["job_id"] == f"{dag_id}.b")
    assert (task_b["new"], task_b["detail"], task_b["dag_run_id"]) == (
        "skipped",
        "upstream_failed",
        drid,
    )
    # instants, not their text: "…:54Z" sorts after "…:54.001000Z" as a string
    ats = [datetime.fromisoformat(e["at"]) for e in events]
    assert ats == sorted(ats)  # one order across the shards
    assert len({e["cursor"] for e in events}) == len(events)

    # pages of 2 give the very same sequence: nothing skipped, nothing twice
    assert [e["cursor"] for e in await all_events(http, limit=2)] == [e["cursor"] for e in events]
    # filters: a job (a DAG's id takes its tasks and DAG runs), a run, a state
    mine = await all_events(http, job_id=dag_id)
    assert mine and all(e["job_id"].startswith(dag_id) for e in mine)
    assert {e["run_id"] for e in await all_events(http, run_id=ok_run)} == {ok_run}
    assert {e["new"] for e in await all_events(http, state="dead_letter")} == {"dead_letter"}
    bad_cursor = await http.get("/api/v1/events", params={"after": "nope"})
    assert bad_cursor.status_code == 422


async def sse(http, path: str, headers: dict[str, str] | None = None):
    """The lines of a Server-Sent Events response, read off a plain socket (each event is
    one chunk of the chunked body, so chunk-size lines never split an event's lines)."""
    url = httpx.URL(str(http.base_url))
    stream = await trio.open_tcp_stream(url.host, url.port)
    head = {"host": f"{url.host}:{url.port}", **dict(http.headers), **(headers or {})}
    head.pop("accept-encoding", None)
    request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items())
    await stream.send_all((request + "\r\n").encode())
    buf = b""
    try:
        while data := await stream.receive_some(65536):
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r").decode()
    finally:
        await stream.aclose()


async def test_events_stream_live_as_server_sent_events(node, worker, http) -> None:
    body = {"name": "live", "command": "true", "schedule": HOURLY}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    seen: list[dict] = []
    ids: list[str] = []

    async def listen(task_status=trio.TASK_STATUS_IGNORED) -> None:
        in_body = False
        async with aclosing(sse(http, f"/api/v1/events/stream?job_id={job_id}")) as lines:
            async for line in lines:
                if not in_body:  # the response head: started once it is all here
                    if line.lower().startswith("content-type:"):
                        assert "text/event-stream" in line
                    if line == "":
                        in_body = True
                        task_status.started()
                elif line.startswith("id: "):
                    ids.append(line[4:])
                elif line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if seen[-1]["new"] == "succeeded":
                        return

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(listen)
            run_id = (await http.post(f"/api/v1/jobs/{job_id}/trigger")).json()["run_id"]
    assert [(e["old"], e["new"]) for e in seen] == [
        (None, "scheduled"),
        ("scheduled", "running"),
        ("running", "succeeded"),
    ]
    assert {e["run_id"] for e in seen} == {run_id} and ids == [e["cursor"] for e in seen]
    assert seen[0]["detail"] == "manual"

    # resuming at Last-Event-ID gives what followed, and nothing before
    headers = {"last-event-id": ids[0]}
    resumed = []
    with trio.fail_after(10):
        path = f"/api/v1/events/stream?job_id={job_id}"
        async with aclosing(sse(http, path, headers)) as lines:
            async for line in lines:
                if line.startswith("data: "):
                    resumed.append(json.loads(line[6:])["new"])
                    if resumed[-1] == "succeeded":
                        break
    assert resumed == ["running", "succeeded"]


async def test_a_team_reads_events_of_its_own_jobs_only(node, http, redis, dep) -> None:
    request = TokenRequest(name="team", scopes=[Scope.READ], prefixes=["a-"])
    secret = (await drive_async(tokens.create_token(dep, request, "t"), redis)).token
    body = {"name": "b-job", "command": "true", "schedule": HOURLY}
    theirs = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    headers = {"authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=http.base_url, headers=headers) as team:
        assert (await team.get("/api/v1/events")).status_code == 403
        assert (await team.get("/api/v1/events", params={"job_id": theirs})).status_code == 404
    assert await admin_token(redis, dep, "other")  # the fixture's own token still works


async def test_events_tail_on_the_command_line(node, worker, http) -> None:
    body = {"name": "cli", "command": "true", "schedule": HOURLY}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    env = {**child_env(), "SHARDSCHED_TOKEN": http.headers["authorization"][7:]}
    args = shardsched_cmd(
        "events", "tail", "--job", job_id, "--follow", "--api", str(http.base_url)
    )
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None
        first = await trio.to_thread.run_sync(proc.stdout.readline)
        assert first.startswith("AT"), (
            first,
            proc.stderr.read() if proc.poll() is not None else "",
        )
        run_id = (await http.post(f"/api/v1/jobs/{job_id}/trigger")).json()["run_id"]
        lines: list[str] = []
        with trio.fail_after(20):
            while not lines or "succeeded" not in lines[-1]:
                lines.append(await trio.to_thread.run_sync(proc.stdout.readline))
        assert [line.split()[1] for line in lines] == [run_id] * 3
        assert ["-> running" in lines[1], "-> succeeded" in lines[2]] == [True, True]
    finally:
        proc.send_signal(signal.SIGINT)
        # waited in a thread: this trio loop serves the API the CLI may still be talking to
        try:
            code = await trio.to_thread.run_sync(lambda: proc.wait(timeout=10))
        except subprocess.TimeoutExpired:
            # what the process made of the signal (ignored or blocked?), then end it
            status = Path(f"/proc/{proc.pid}/status").read_text()
            stack = Path(f"/proc/{proc.pid}/wchan").read_text()
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
            sig = [line for line in status.splitlines() if line.startswith("Sig")]
            raise AssertionError(f"SIGINT did not end the tail: {sig}, wchan {stack}") from None
        assert code == 0
        proc.stdout.close()
        proc.stderr.close()
    once = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            shardsched_cmd("events", "tail", "--job", job_id, "--api", str(http.base_url)),
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    )
    assert once.returncode == 0 and once.stdout.count(run_id) == 3, once.stdout + once.stderr

    def tail(*extra: str) -> str:
        args = ["events", "tail", "--job", job_id, "--api", str(http.base_url), *extra]
        out = subprocess.run(shardsched_cmd(*args), capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        return out.stdout

    first = await trio.to_thread.run_sync(tail, "--limit", "1")
    after = first.rsplit("(more: --after ", 1)[1].rstrip(")\n")
    rest = await trio.to_thread.run_sync(tail, "--after", after)
    assert first.count(run_id) == 1 and rest.count(run_id) == 2 and "(more:" not in rest
