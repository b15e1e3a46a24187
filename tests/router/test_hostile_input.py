"""Nothing a user sends can stop a process, and what a user may repeat has one effect.

Each case was reproduced on an earlier main: a 1e308 grace that crashed every node, a cron
that never fires answered 500, a job that could not be planned left silently unscheduled,
a double-clicked retry that ran the command twice, a trigger body silently dropped, a past
``once`` job counted as a missed schedule.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from conftest import admin_token, keyspace, rounds_later, wait_until
from shardsched import ops
from shardsched.ops.history import audit
from shardsched.store.drive import drive_async


async def post_job(http, **body):
    return await http.post("/api/v1/jobs", json={"name": "j", "command": "true", **body})


async def test_out_of_range_numbers_are_422_and_change_nothing(node, http, redis, dep) -> None:
    before = await keyspace(redis, dep.namespace)
    once = {"type": "once", "at": "2020-01-01T00:00:00Z"}
    for field, value in (
        ("misfire_grace_s", 1e308),
        ("misfire_grace_s", -1),
        ("timeout_s", 1e308),
        ("lease_s", 1e9),
        ("max_catchup", 0),
        ("max_catchup", 10**9),
    ):
        reply = await post_job(http, schedule=once, **{field: value})
        assert reply.status_code == 422, (field, value, reply.text)
        assert reply.json()["error"]["details"]["field"] == f"$.{field}"
    reply = await post_job(http, schedule={"type": "interval", "every_s": 1e308})
    assert reply.status_code == 422
    reply = await post_job(http, schedule=once, retry_policy={"base_s": 1e308})
    assert reply.status_code == 422
    assert await keyspace(redis, dep.namespace) == before
    assert node.owned, "the node still owns its shards"


async def test_a_cron_that_never_fires_is_422_everywhere(node, http, redis, dep) -> None:
    never = {"type": "cron", "expression": "0 0 30 2 *"}
    before = await keyspace(redis, dep.namespace)
    reply = await post_job(http, schedule=never)
    assert reply.status_code == 422, reply.text
    assert "never fires" in reply.json()["error"]["message"]
    preview = await http.post("/api/v1/schedules/preview", json={"schedule": never})
    assert preview.status_code == 422, preview.text
    assert await keyspace(redis, dep.namespace) == before
    job_id = (await post_job(http, schedule={"type": "interval", "every_s": 60})).json()["job_id"]
    before = await keyspace(redis, dep.namespace)
    patched = await http.patch(f"/api/v1/jobs/{job_id}", json={"schedule": never})
    assert patched.status_code == 422, patched.text
    assert await keyspace(redis, dep.namespace) == before
    # a leap-day schedule fires (every four years): accepted
    leap = {"type": "cron", "expression": "0 0 29 2 *"}
    assert (await post_job(http, schedule=leap)).status_code == 201


async def test_a_preview_past_the_last_representable_instant_is_2xx(http) -> None:
    for schedule in (
        {"type": "cron", "expression": "* * * * *"},
        {"type": "interval", "every_s": 86400},
    ):
        reply = await http.post(
            "/api/v1/schedules/preview",
            json={"schedule": schedule, "after": "9999-12-31T23:50:00Z", "count": 20},
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["fire_times"] == []


async def test_a_trigger_body_is_decoded_like_every_other(node, worker, http, redis, dep) -> None:
    # a job with no tick soon: an interval job's first run, claimed between the two
    # snapshots, wrote its lease's reclaim entry and failed this once under load
    yearly = {"type": "cron", "expression": "0 0 1 1 *"}
    job_id = (await post_job(http, schedule=yearly)).json()["job_id"]
    before = await keyspace(redis, dep.namespace)
    bad = await http.post(f"/api/v1/jobs/{job_id}/trigger", json={"params": {"x": 1}})
    assert bad.status_code == 422, bad.text
    assert bad.json()["error"]["details"]["field"] == "$.params"
    garbage = await http.post(
        f"/api/v1/jobs/{job_id}/trigger",
        content=b"{nope",
        headers={"content-type": "application/json"},
    )
    assert garbage.status_code == 400
    untyped = await http.post(f"/api/v1/jobs/{job_id}/trigger", content=b"{}")
    assert untyped.status_code == 415, untyped.text
    assert await keyspace(redis, dep.namespace) == before
    assert (await http.post(f"/api/v1/jobs/{job_id}/trigger", json={})).status_code == 201
    assert (await http.post(f"/api/v1/jobs/{job_id}/trigger")).status_code == 201


async def test_a_job_that_cannot_be_planned_is_quarantined_and_the_node_carries_on(
    node, worker, http, redis, dep, tmp_path: Path
) -> None:
    """A timing no planner can use (here a zone name that does not exist, written the way a
    bad older release or a hand edit would leave it): paused with the reason, counted,
    in the status and the audit; other jobs keep firing."""
    marks = tmp_path / "good"
    good = (
        await post_job(
            http, schedule={"type": "interval", "every_s": 0.5}, command=f"echo x >> {marks}"
        )
    ).json()["job_id"]
    bad = (
        await post_job(
            http, schedule={"type": "cron", "expression": "* * * * *", "timezone": "UTC"}
        )
    ).json()["job_id"]
    sk = dep.keys_for(bad)
    timing = await redis.execute("HGET", sk.job(bad), "timing")
    await redis.execute(
        "HSET", sk.job(bad), "timing", timing.replace(b'"UTC"', b'"Not/AZone"'), "first", ""
    )
    # due now: the owner plans it at once
    await redis.execute("ZADD", sk.timer, await redis.time_ms() - 10, bad)
    await redis.execute("PUBLISH", dep.globals.wake_channel, sk.shard)

    async def quarantined() -> dict | None:
        job = (await http.get(f"/api/v1/jobs/{bad}")).json()
        return job if job["status"] == "paused" else None

    job = await wait_until(quarantined, timeout=10)
    assert job["pause_reason"].startswith("quarantined: "), job
    assert "Not/AZone" in job["pause_reason"]
    assert job["next_run_at"] is None
    assert node.metrics.quarantined._value.get() == 1
    status = (await http.get("/api/v1/status")).json()
    assert status["quarantined"] == 1
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert bad in report.quarantined
    # the node is alive and the good job keeps firing
    lines = len(marks.read_text().splitlines()) if marks.exists() else 0

    async def more() -> bool:
        return marks.exists() and len(marks.read_text().splitlines()) >= lines + 3

    await wait_until(more, timeout=10)
    assert node.owned and good


async def test_a_retry_clicked_twice_runs_the_job_once(node, worker, http, redis, dep, tmp_path):
    marks = tmp_path / "runs"
    reply = await post_job(
        http,
        schedule={"type": "once", "at": "2020-01-01T00:00:00Z"},
        command=f'echo "$SHARDSCHED_RUN_ID" >> {marks}; [ -f {marks}.ok ]',
        retry_policy={"max_attempts": 2, "base_s": 0.1, "max_s": 0.1, "jitter": False},
    )
    job_id = reply.json()["job_id"]

    async def dead() -> list | None:
        page = (await http.get("/api/v1/dead-letter")).json()["runs"]
        return [r for r in page if r["job_id"] == job_id] or None

    (run,) = await wait_until(dead, timeout=15)
    (tmp_path / "runs.ok").touch()
    replies: list = []

    async def retry() -> None:
        replies.append(await http.post(f"/api/v1/runs/{run['run_id']}/retry"))

    async with trio.open_nursery() as n:  # two clients at once
        n.start_soon(retry)
        n.start_soon(retry)
    codes = sorted(r.status_code for r in replies)
    assert codes == [201, 409], [r.text for r in replies]
    second = next(r for r in replies if r.status_code == 409).json()["error"]
    assert second["code"] == "already_retried"
    next_id = second["details"]["next_run_id"]
    assert next_id == run["run_id"][: -len(":2")] + ":3"

    async def succeeded() -> bool:
        return (await http.get(f"/api/v1/runs/{next_id}")).json()["state"] == "succeeded"

    await wait_until(succeeded, timeout=15)
    # a duplicate delivery, if any, would have run within a second: two rounds of the node
    await rounds_later(lambda: node.maintainer.rounds, 2)
    executions = marks.read_text().split()
    assert executions.count(next_id) == 1, executions
    again = await http.post(f"/api/v1/runs/{run['run_id']}/retry")
    assert again.status_code == 409


async def test_pause_and_resume_repeated_concurrently_have_one_effect(node, http) -> None:
    job_id = (await post_job(http, schedule={"type": "interval", "every_s": 3600})).json()["job_id"]
    for status in ("paused", "active"):
        replies: list = []

        async def patch(status: str = status, replies: list = replies) -> None:
            replies.append(await http.patch(f"/api/v1/jobs/{job_id}", json={"status": status}))

        before = (await http.get(f"/api/v1/jobs/{job_id}")).json()["version"]
        async with trio.open_nursery() as n:
            n.start_soon(patch)
            n.start_soon(patch)
        assert [r.status_code for r in replies] == [200, 200]
        versions = sorted(r.json()["version"] for r in replies)
        # one new version; the second answer is that same version (nothing changed)
        assert versions == [before + 1, before + 1], versions
        assert all(r.json()["status"] == status for r in replies)
    history = (await http.get(f"/api/v1/jobs/{job_id}/versions")).json()["versions"]
    assert len(history) == 3


async def test_a_past_once_job_fires_at_once_and_is_not_a_missed_schedule(
    node, worker, http, redis, dep
) -> None:
    reply = await post_job(http, schedule={"type": "once", "at": "2001-01-01T00:00:00Z"})
    job_id = reply.json()["job_id"]

    async def done() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs if runs and runs[0]["state"] == "succeeded" else None

    (run,) = await wait_until(done, timeout=10)
    assert run["scheduled_for"] >= reply.json()["next_run_at"][:19]
    text = node.metrics.render()[0].decode()
    assert (
        f'shardsched_jobs_missed_schedule_total{{critical="false",job_id="{job_id}"}}' not in text
    )
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.missing == 0 and report.fired == 1


def test_bulk_registration_validates_everything_first_and_names_what_it_committed(
    own_redis_server,
) -> None:
    import pytest

    from shardsched import BulkPartiallyApplied, Client, ValidationError
    from shardsched.core.models import IntervalSchedule, JobSpec

    client = Client(own_redis_server.url, "bulk")
    try:
        good = [
            JobSpec(name=f"b{i}", schedule=IntervalSchedule(every_s=3600), command="true")
            for i in range(25)
        ]
        bad = JobSpec(name="x\x1b[31m", schedule=IntervalSchedule(every_s=3600), command="true")
        with pytest.raises(ValidationError) as raised:
            client.add_jobs([*good, bad, *good], batch=10)
        assert raised.value.field == "$[25].name", raised.value.field
        assert client.list_jobs().jobs == [], "an invalid spec anywhere writes nothing"

        # Redis goes away once batch 1 is read back (batch 2 written and maybe answered,
        # batch 3 written to a dead server): the error lists what was committed.
        calls = {"n": 0}
        real = client._read_back

        def flaky(conn, op, sent):
            replies = real(conn, op, sent)
            calls["n"] += 1
            if calls["n"] == 1:
                own_redis_server.kill()
            return replies

        client._read_back = flaky
        with pytest.raises(BulkPartiallyApplied) as partial:
            client.add_jobs(good, batch=10)
        assert 0 < len(partial.value.created) < 25
        own_redis_server.start()
        client._read_back = real
        listed = {j.job_id for j in client.list_jobs(limit=100).jobs}
        assert {c.job_id for c in partial.value.created} <= listed
    finally:
        client.close()


async def test_delete_and_backfill_repeated_concurrently_have_one_effect(
    node, http, redis, dep
) -> None:
    job_id = (await post_job(http, schedule={"type": "interval", "every_s": 3600})).json()["job_id"]
    window = {"since": "2026-01-01T00:00:00Z", "until": "2026-01-01T05:00:00Z"}
    replies: list = []

    async def backfill() -> None:
        replies.append(await http.post(f"/api/v1/jobs/{job_id}/backfill", json=window))

    async with trio.open_nursery() as n:
        n.start_soon(backfill)
        n.start_soon(backfill)
    bodies = sorted((r.json() for r in replies), key=lambda b: -b["queued"])
    assert [r.status_code for r in replies] == [202, 202]
    assert bodies[0]["ticks"] == bodies[1]["ticks"] > 0
    assert bodies[0]["queued"] == bodies[0]["ticks"] and bodies[0]["already"] == 0
    assert bodies[1]["queued"] == 0 and bodies[1]["already"] == bodies[1]["ticks"]

    replies.clear()

    async def delete() -> None:
        replies.append(await http.delete(f"/api/v1/jobs/{job_id}"))

    async with trio.open_nursery() as n:
        n.start_soon(delete)
        n.start_soon(delete)
    codes = sorted(r.status_code for r in replies)
    assert codes == [200, 200], [r.text for r in replies]  # a DELETE is idempotent
    assert replies[0].json() == replies[1].json()
    versions = (await http.get(f"/api/v1/jobs/{job_id}/versions")).json()["versions"]
    assert [v["status"] for v in versions].count("deleted") == 1  # deleted once


async def test_a_1000_task_chain_listed_downstream_first_is_accepted(node, http) -> None:
    """It raised RecursionError (a 500) in the cycle check."""
    tasks = [
        {"name": f"t{i}", "command": "true", "depends_on": [f"t{i + 1}"] if i < 999 else []}
        for i in range(1000)
    ]
    body = {"name": "chain", "schedule": {"type": "interval", "every_s": 3600}, "tasks": tasks}
    reply = await http.post("/api/v1/dags", json=body)
    assert reply.status_code == 201, reply.text[:500]
    tasks[999]["depends_on"] = ["t0"]  # now a 1,000-long cycle
    cycle = await http.post("/api/v1/dags", json=body)
    assert cycle.status_code == 422, cycle.text[:500]
    assert "dependency cycle" in cycle.json()["error"]["message"]


async def test_a_full_redis_is_503_with_retry_after_and_nothing_changes(
    own_redis_server,
) -> None:
    import httpx
    import redis as redis_py

    from shardsched.bench.faults import fill_redis, free_redis
    from shardsched.router.app import create_app
    from shardsched.service import serve_http
    from shardsched.store.redis import Redis

    redis = Redis(own_redis_server.url, size=4)
    sync = redis_py.Redis(port=own_redis_server.port)
    try:
        dep = await drive_async(ops.open_deployment("oom", 4), redis)
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(serve_http, create_app(redis, dep), "127.0.0.1:0")
            headers = {"authorization": f"Bearer {await admin_token(redis, dep)}"}
            async with httpx.AsyncClient(base_url=binds[0], timeout=10, headers=headers) as http:
                body = {
                    "name": "j",
                    "command": "true",
                    "schedule": {"type": "interval", "every_s": 60},
                }
                fill_redis(sync)
                before = await keyspace(redis, "oom")
                full = await http.post("/api/v1/jobs", json=body)
                assert full.status_code == 503, full.text
                assert full.headers["retry-after"] == "1"
                assert full.json()["error"]["code"] == "redis_unavailable"
                assert "OOM" in full.json()["error"]["message"]
                assert await keyspace(redis, "oom") == before
                # reads still work while writes are refused
                assert (await http.get("/api/v1/jobs")).status_code == 200
                free_redis(sync)
                assert (await http.post("/api/v1/jobs", json=body)).status_code == 201
            nursery.cancel_scope.cancel()
    finally:
        sync.close()
        await redis.aclose()


async def test_bad_cursors_are_422(node, http) -> None:
    import base64

    def cursor(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    for bad in (cursor(b"nan|x"), cursor(b"inf|x"), cursor(b"-inf|x"), "garbage!!", cursor(b"")):
        for path in ("/api/v1/jobs", "/api/v1/dead-letter", "/api/v1/dags"):
            reply = await http.get(path, params={"cursor": bad})
            assert reply.status_code == 422, (path, bad, reply.text)
            assert reply.json()["error"]["details"]["field"] == "$.cursor"


async def test_names_with_control_or_format_characters_are_422(node, http, redis, dep) -> None:
    before = await keyspace(redis, dep.namespace)
    for name in ("a\x00b", "red\x1b[31m", "evil\u202etxt.exe", "zero\u200bwidth", "line\nbreak"):
        reply = await post_job(http, name=name, schedule={"type": "interval", "every_s": 60})
        assert reply.status_code == 422, (name, reply.text)
        error = reply.json()["error"]
        assert error["details"]["field"] == "$.name"
        assert "control or invisible format characters" in error["message"], error
    assert await keyspace(redis, dep.namespace) == before
    ok = await post_job(http, name="naïve 日本 ok", schedule={"type": "interval", "every_s": 60})
    assert ok.status_code == 201


def test_the_cli_never_prints_raw_control_characters() -> None:
    from shardsched.cli.render import table

    out = table(["NAME"], [["x\x1b[31mred\u202eevil\x07"]])
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "\\x1b[31mred\\u202eevil\\x07" in out


async def test_a_request_h11_cannot_parse_gets_the_json_error_shape(http) -> None:
    """A bad Content-Length (schemathesis found it): 400 in the API's error shape, not an
    empty body, and the server serves the next connection."""
    host, port = http.base_url.host, http.base_url.port
    for raw in (
        b"GET /api/v1/dags HTTP/1.1\r\nHost: x\r\ncontent-length: In/f\r\n\r\n",
        b"GET /api/v1/dags HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
    ):
        stream = await trio.open_tcp_stream(host, port)
        await stream.send_all(raw)
        answer = b""
        with trio.fail_after(5):
            while chunk := await stream.receive_some(4096):
                answer += chunk
        await stream.aclose()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), answer
        assert b"content-type: application/json" in head.lower(), head
        assert json.loads(body)["error"]["code"] == "bad_request", body
    assert (await http.get("/healthz")).status_code == 200


async def test_bodies_nested_too_deeply_are_422_and_change_nothing(node, http, redis, dep) -> None:
    """A body 50,000 deep, and trigger args 1,000 deep, were a 500 with a traceback (a
    RecursionError while decoding or naming the field)."""
    made = await post_job(http, schedule={"type": "interval", "every_s": 3600})
    job_id = made.json()["job_id"]
    before = await keyspace(redis, dep.namespace)
    deep_job = (
        b'{"name":"j","command":"true","schedule":{"type":"interval","every_s":60},"args":'
        + b"[" * 50000
        + b"]" * 50000
        + b"}"
    )
    for path, body in (
        ("/api/v1/jobs", deep_job),
        ("/api/v1/jobs", b"[" * 50000 + b"]" * 50000),
        (f"/api/v1/jobs/{job_id}/trigger", b'{"args":{"a":' + b"[" * 1000 + b"]" * 1000 + b"}}"),
        ("/api/v1/dags", b'{"tasks":' + b"{" * 5000),
    ):
        reply = await http.post(path, content=body, headers={"content-type": "application/json"})
        assert reply.status_code == 422, (path, reply.status_code, reply.text[:300])
        assert reply.json()["error"]["details"]["field"] == "$"
    assert await keyspace(redis, dep.namespace) == before, "a refused body wrote something"
    # 64 levels are still a body like any other
    ok = await http.post(
        f"/api/v1/jobs/{job_id}/trigger",
        json={"args": {"a": json.loads("[" * 60 + "]" * 60)}},
    )
    assert ok.status_code in (200, 201, 202), ok.text


async def test_a_413_closes_the_connection_and_says_so(http) -> None:
    """After a 413 the rest of the body may still be on its way: the server closes the
    connection, and says ``Connection: close`` so a keep-alive client opens a new one
    (it failed its next request with "server disconnected")."""
    host, port = http.base_url.host, http.base_url.port
    token = http.headers["authorization"]
    for declared in (True, False):  # a Content-Length over the cap, or a chunked body
        stream = await trio.open_tcp_stream(host, port)
        head = b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
        head += token.encode() + b"\r\nContent-Type: application/json\r\n"
        if declared:
            head += b"Content-Length: %d\r\n\r\n{" % (2 * 1024 * 1024)
            await stream.send_all(head)
        else:
            chunk = b" " * 65536
            await stream.send_all(head + b"Transfer-Encoding: chunked\r\n\r\n")
            for _ in range(20):
                await stream.send_all(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = b""
        with trio.fail_after(10):
            while chunk_in := await stream.receive_some(65536):
                answer += chunk_in
        status, _, rest = answer.partition(b"\r\n")
        assert status.startswith(b"HTTP/1.1 413"), answer[:300]
        assert b"\r\nconnection: close\r\n" in rest.lower(), rest[:300]
        await stream.aclose()
    for _ in range(3):  # and the API carries on
        assert (await http.get("/api/v1/jobs")).status_code == 200


async def test_a_cancel_or_pause_reason_is_one_printable_line(node, http, redis, dep) -> None:
    """A reason is shown in tables, logs and the console: a NUL, an ESC (a terminal
    sequence) or a newline (a forged log line) is a 422, and nothing is stored."""
    made = await post_job(http, schedule={"type": "interval", "every_s": 3600})
    job_id = made.json()["job_id"]
    run = (await http.post(f"/api/v1/jobs/{job_id}/trigger")).json()["run_id"]
    before = await keyspace(redis, dep.namespace)
    for reason in ("a\x00b", "red \x1b[31malert", "x\ny", "bidi \u202e", "tab\t"):
        cancel = await http.post(f"/api/v1/runs/{run}/cancel", json={"reason": reason})
        assert cancel.status_code == 422, (reason, cancel.text)
        assert cancel.json()["error"]["details"]["field"] == "$.reason"
        pause = await http.patch(
            f"/api/v1/jobs/{job_id}", json={"status": "paused", "pause_reason": reason}
        )
        assert pause.status_code == 422, (reason, pause.text)
    assert await keyspace(redis, dep.namespace) == before
    assert (
        await http.post(f"/api/v1/runs/{run}/cancel", json={"reason": "the db moves: é ✓"})
    ).status_code == 200


async def test_an_idempotency_key_reused_with_other_args_is_409(node, http) -> None:
    """The same key and args answer the first run (a retried request); other args under
    the same key are a 409 naming the first run, not silently its answer."""
    made = await post_job(http, schedule={"type": "interval", "every_s": 3600})
    job_id = made.json()["job_id"]
    url = f"/api/v1/jobs/{job_id}/trigger"
    first = await http.post(url, json={"args": {"a": 1, "b": 2}, "idempotency_key": "k1"})
    assert first.status_code in (200, 201, 202), first.text
    again = await http.post(url, json={"args": {"b": 2, "a": 1}, "idempotency_key": "k1"})
    assert again.json()["run_id"] == first.json()["run_id"] and again.json()["repeated"]
    other = await http.post(url, json={"args": {"a": 2}, "idempotency_key": "k1"})
    assert other.status_code == 409, other.text
    error = other.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    assert error["details"] == {
        "idempotency_key": "k1",
        "key": "k1",
        "run_id": first.json()["run_id"],
        "type": "IdempotencyKeyReused",
    }
    none = await http.post(url, json={"idempotency_key": "k1"})  # no args: not the same
    assert none.status_code == 409
    # types count: false is not 0, 1 is not 1.0, true is not 1 (Python's == says they are)
    for key, args, other in (
        ("k2", {"dry_run": False}, {"dry_run": 0}),
        ("k3", {"n": [1, 0]}, {"n": [True, False]}),
        ("k4", {"x": 1}, {"x": 1.0}),
    ):
        assert (await http.post(url, json={"args": args, "idempotency_key": key})).is_success
        again = await http.post(url, json={"args": other, "idempotency_key": key})
        assert again.status_code == 409, (args, other, again.text)
