"""Notifications (issue #32) end to end with real parts: runs fail on a real worker, the
owner notes them from its event stream, the dispatcher groups and delivers them to a real
HTTP receiver on loopback. Checked: the HMAC signature, retries with the same idempotency
key, grouping and rate limits (a burst of failures makes one message), recovery, a dead
channel that never blocks firing, apprise, and the API's refusals."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from conftest import wait_until
from notify.receiver import receiver
from shardsched.shard.channels import UNREACHED
from shardsched.worker.handlers import HandlerContext, handler

ONCE = {"type": "once", "at": "2020-01-01T00:00:00Z"}
NO_RETRY = {"max_attempts": 1}


@handler("test-notify-fail", inline=True)
def _fail(ctx: HandlerContext) -> None:
    if (ctx.args or {}).get("fail", True):
        raise RuntimeError("the data source said no")


async def _job(http, name: str, command: str, **extra) -> str:
    body = {"name": name, "command": command, "schedule": ONCE, "retry_policy": NO_RETRY}
    reply = await http.post("/api/v1/jobs", json={**body, **extra})
    assert reply.status_code == 201, reply.text
    return reply.json()["job_id"]


async def _channel(http, name: str, **body) -> None:
    reply = await http.put(f"/api/v1/notifications/channels/{name}", json=body)
    assert reply.status_code in (200, 201), reply.text


async def _rule(http, **body) -> str:
    reply = await http.post("/api/v1/notifications/rules", json=body)
    assert reply.status_code == 201, reply.text
    return reply.json()["id"]


async def test_a_failure_reaches_a_signed_webhook_retried_with_one_idempotency_key(
    node, worker, http
) -> None:
    with receiver() as rec:
        rec.answers = [503, 500]  # the first two deliveries fail
        secret = "s3cret-for-hmac"
        await _channel(http, "hook", kind="webhook", url=rec.url + "/hook", secret=secret,
                       retry_base_s=0.1)  # fmt: skip
        await _rule(http, events=["failed", "dead_letter"], channels=["hook"], group_s=0)
        job_id = await _job(http, "nightly-report", "echo fetching rows; echo boom >&2; exit 3",
                            labels={"team": "data"})  # fmt: skip
        await wait_until(lambda: _count(rec.ok()), timeout=30)
        assert [r["status"] for r in rec.requests] == [503, 500, 200]
        keys = {r["headers"]["Idempotency-Key"] for r in rec.requests}
        assert len(keys) == 1  # every attempt of the message carries the same key
        for r in rec.requests:
            ts, sig = r["headers"]["X-Shardsched-Timestamp"], r["headers"]["X-Shardsched-Signature"]
            mac = hmac.new(secret.encode(), ts.encode() + b"." + r["body"], hashlib.sha256)
            assert sig == "v1=" + mac.hexdigest()
        assert [r["headers"]["X-Shardsched-Attempt"] for r in rec.requests] == ["1", "2", "3"]
        msg = json.loads(rec.requests[-1]["body"])
        (item,) = msg["items"]
        assert item["job_id"] == job_id and item["name"] == "nightly-report"
        assert item["labels"] == {"team": "data"}
        assert item["attempt"] == 1 and item["run_id"].startswith(job_id + ":")
        assert item["exit_code"] == 3 and "3" in item["reason"]
        assert "boom" in item["output_tail"] or "fetching" in item["output_tail"]
        assert "nightly-report" in msg["title"] and msg["total"] == 1
        (keyed,) = keys
        got = (await http.get(f"/api/v1/notifications/deliveries/{keyed}")).json()
        assert got["state"] == "delivered"
        assert [a["outcome"] for a in got["attempts"]] == ["retry", "retry", "delivered"]
        assert [a["answer"] for a in got["attempts"]] == ["HTTP 503", "HTTP 500", "HTTP 200"]
        listed = (await http.get("/api/v1/notifications/deliveries?channel=hook")).json()
        assert [d["id"] for d in listed["deliveries"]] == [keyed]


async def _count(items: list) -> int:
    return len(items)


@pytest.mark.slow  # moved out of the default run to keep it under 8 min
async def test_a_burst_of_failures_is_one_message_per_group_and_rate(node, worker, http) -> None:
    with receiver() as rec:
        await _channel(http, "burst", kind="webhook", url=rec.url, max_per_minute=1)
        await _rule(http, events=["failed", "dead_letter"], channels=["burst"], group_s=5,
                    labels={"wave": "1"})  # fmt: skip
        jobs = [
            await _job(http, f"j{i}", "handler:test-notify-fail", labels={"wave": "1"})
            for i in range(40)
        ]
        await _job(http, "other", "handler:test-notify-fail", labels={"wave": "2"})

        async def noted() -> bool:
            return sum(b["total"] for b in rec.bodies()) >= 40

        await wait_until(noted, timeout=30)
        bodies = rec.bodies()
        assert len(bodies) == 1  # one message, not 40 (and the rate allows one a minute)
        items = bodies[0]["items"]
        assert bodies[0]["total"] == 40 and bodies[0]["omitted"] == 20 and len(items) == 20
        assert sorted(bodies[0]["jobs"]) == sorted(jobs)  # each once, not the other wave's
        assert "40 notifications" in bodies[0]["title"]
        # the owner reads its events again from the start: nothing is noted twice
        before = node.follower.matched
        for shard, epoch in node.leases.items():
            await node.redis.execute("SET", node.dep.shard(shard).follow_cursor, "0-0")
            node.follower._cursors[shard] = (epoch, "0-0")
        rounds = node.follower.rounds
        await wait_until(lambda: _at_least(node.follower.rounds, rounds + 2), timeout=10)
        assert node.follower.matched == before


async def _at_least(value: int, want: int) -> bool:
    return value >= want


async def test_recovered_and_auto_paused_are_noted(node, worker, http) -> None:
    with receiver() as rec:
        await _channel(http, "ops", kind="webhook", url=rec.url)
        job_id = await _job(http, "flaky", "handler:test-notify-fail")
        await _rule(http, events=["failed", "dead_letter", "recovered"], channels=["ops"],
                    job_id=job_id, group_s=0)  # fmt: skip
        await wait_until(lambda: _count(rec.bodies()), timeout=30)
        trig = await http.post(f"/api/v1/jobs/{job_id}/trigger", json={"args": {"fail": False}})
        assert trig.status_code == 201, trig.text
        await wait_until(lambda: _at_least(len(rec.bodies()), 2), timeout=30)
        kinds = [b["items"][0]["kind"] for b in rec.bodies()]
        assert kinds[0] in ("failed", "dead_letter") and kinds[1] == "recovered"

        await _rule(http, events=["auto_paused"], channels=["ops"], labels={"case": "pause"},
                    group_s=0)  # fmt: skip
        rounds = node.follower.rounds  # a rule holds from the follower's next reading on
        await wait_until(lambda: _at_least(node.follower.rounds, rounds + 2), timeout=10)
        await _job(http, "pauses", "handler:test-notify-fail", auto_pause_after=1,
                   labels={"case": "pause"})  # fmt: skip

        async def told() -> bool:
            return any(b["items"][0]["kind"] == "auto_paused" for b in rec.bodies())

        await wait_until(told, timeout=30)


async def test_a_dead_channel_never_blocks_firing(node, worker, http) -> None:
    await _channel(http, "dead", kind="webhook", url="http://127.0.0.1:9/nothing",
                   max_attempts=2, retry_base_s=0.1, timeout_s=1)  # fmt: skip
    await _rule(http, events=["failed", "dead_letter"], channels=["dead"], group_s=0)
    for i in range(5):
        await _job(http, f"f{i}", "handler:test-notify-fail")
    ok = await _job(http, "fine", "true")

    async def settled() -> list | None:
        found = (await http.get("/api/v1/notifications/deliveries?state=failed")).json()
        return found["deliveries"] or None

    (failed,) = await wait_until(settled, timeout=30)
    assert [a["outcome"] for a in failed["attempts"]] == ["retry", "failed"]
    # what stopped it is the node's log's business: a channel is no port scanner
    assert failed["attempts"][0]["answer"] == UNREACHED
    assert failed["attempts"][0]["took_ms"] == 0  # nor how long it took (refused or silent)
    runs = (await http.get(f"/api/v1/jobs/{ok}/runs")).json()["runs"]
    assert runs and runs[0]["state"] == "succeeded"


async def test_apprise_carries_a_message_by_url(node, http) -> None:
    pytest.importorskip("apprise")
    with receiver() as rec:
        host = rec.url.removeprefix("http://")
        await _channel(http, "chat", kind="apprise", url=f"json://{host}/apprise")
        sent = await http.post("/api/v1/notifications/channels/chat/test")
        assert sent.status_code == 201, sent.text
        await wait_until(lambda: _count(rec.requests), timeout=30)
        (req,) = rec.requests
        assert req["path"] == "/apprise"
        got = json.loads(req["body"])
        assert got["title"] == "shardsched: a test message for channel chat"
        listed = (await http.get("/api/v1/notifications/channels")).json()["channels"]
        assert listed[0]["url"] == "json://…"  # an apprise URL may hold a password


async def test_the_api_refuses_what_cannot_work_and_never_shows_a_secret(http) -> None:
    bad = await http.put(
        "/api/v1/notifications/channels/x", json={"kind": "webhook", "url": "ftp://a"}
    )
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "$.url"
    bad = await http.put("/api/v1/notifications/channels/Bad%20Name",
                         json={"kind": "webhook", "url": "http://127.0.0.1:1"})  # fmt: skip
    assert bad.status_code == 422
    extra = {"kind": "webhook", "url": "http://127.0.0.1:1", "bogus": 1}
    bad = await http.put("/api/v1/notifications/channels/x", json=extra)
    assert bad.status_code == 422
    nochan = await http.post(
        "/api/v1/notifications/rules", json={"events": ["failed"], "channels": ["nope"]}
    )
    assert nochan.status_code == 422 and "nope" in nochan.text
    badkind = await http.post(
        "/api/v1/notifications/rules", json={"events": ["exploded"], "channels": ["x"]}
    )
    assert badkind.status_code == 422
    await _channel(http, "x", kind="webhook", url="http://127.0.0.1:1/", secret="hush",
                   headers={"Authorization": "Bearer hush"})  # fmt: skip
    listed = (await http.get("/api/v1/notifications/channels")).text
    assert "hush" not in listed and '"signed":true' in listed.replace(" ", "")
    rule = await _rule(http, events=["missed"], channels=["x"])
    used = await http.delete("/api/v1/notifications/channels/x")
    assert used.status_code == 409 and rule in used.text
    assert (await http.delete(f"/api/v1/notifications/rules/{rule}")).status_code == 200
    assert (await http.delete(f"/api/v1/notifications/rules/{rule}")).status_code == 404
    assert (await http.delete("/api/v1/notifications/channels/x")).status_code == 200
    assert (await http.get("/api/v1/notifications/deliveries/nothing")).status_code == 404
    weird = await http.get("/api/v1/notifications/deliveries/%7Bx%7D%00")
    assert weird.status_code == 404
    badid = await http.put("/api/v1/notifications/rules/nr_UPPER%21", json={"events": ["failed"],
                           "channels": ["x"]})  # fmt: skip
    assert badid.status_code == 422


@pytest.mark.slow  # moved out of the default run to keep it under 8 min
async def test_an_overrunning_run_and_a_stalled_dag_task_are_noted(node, worker, http) -> None:
    with receiver() as rec:
        await _channel(http, "late", kind="webhook", url=rec.url)
        await _rule(http, events=["overrunning", "deadline_missed"], channels=["late"], group_s=0)
        rounds = node.follower.rounds
        await wait_until(lambda: _at_least(node.follower.rounds, rounds + 2), timeout=10)
        # past 90 % of its 12 s timeout (10.8 s) the worker tells of it (it looks every
        # second), then kills it at 12 s
        long_id = await _job(http, "slow", "sleep 30", timeout_s=12)
        dag = {
            "name": "stuck",
            "schedule": {"type": "cron", "expression": "30 2 * * *"},
            "stall_sla_s": 0.5,
            "tasks": [{"name": "t", "command": "true", "queue": "nobody-serves-this"}],
        }
        made = await http.post("/api/v1/dags", json=dag)
        assert made.status_code == 201, made.text
        dag_id = made.json()["dag_id"]
        assert (await http.post(f"/api/v1/dags/{dag_id}/trigger")).status_code == 201

        async def both() -> dict | None:
            seen = {b["items"][0]["kind"]: b["items"][0] for b in rec.bodies()}
            return seen if {"overrunning", "deadline_missed"} <= set(seen) else None

        seen = await wait_until(both, timeout=40)
        assert seen["overrunning"]["job_id"] == long_id
        assert seen["overrunning"]["reason"].startswith("overrunning: running")
        assert seen["deadline_missed"]["job_id"] == f"{dag_id}.t"
        assert seen["deadline_missed"]["dag_run_id"].startswith(dag_id + ":")
        assert "stall SLA" in seen["deadline_missed"]["reason"]


async def test_alertmanagers_alerts_go_out_over_the_same_channels(node, http) -> None:
    with receiver() as rec:
        await _channel(http, "pager", kind="webhook", url=rec.url)
        await _rule(http, events=["alert"], channels=["pager"], group_s=0)
        alert = {
            "status": "firing",
            "labels": {"alertname": "ShardschedShardUnowned", "severity": "page"},
            "annotations": {"summary": "shard 3 has no owner"},
            "startsAt": "2026-12-03T10:00:00Z",
            "fingerprint": "abc123",
        }
        payload = {"version": "4", "status": "firing", "receiver": "shardsched",
                   "alerts": [alert]}  # fmt: skip
        taken = await http.post("/api/v1/notifications/alerts", json=payload)
        assert taken.status_code == 200 and taken.json() == {"received": 1, "noted": 1}
        again = await http.post("/api/v1/notifications/alerts", json=payload)  # a repeat
        assert again.json()["noted"] == 0
        resolved = {**payload, "alerts": [{**alert, "status": "resolved"}]}
        assert (await http.post("/api/v1/notifications/alerts", json=resolved)).json()["noted"] == 1
        await wait_until(lambda: _at_least(sum(b["total"] for b in rec.bodies()), 2), timeout=30)
        items = [i for b in rec.bodies() for i in b["items"]]  # one message or two
        assert [i["reason"].split(":")[0] for i in items] == ["firing", "resolved"]
        assert items[0]["name"] == "ShardschedShardUnowned"
        assert "shard 3 has no owner" in rec.bodies()[0]["text"]
        bad = await http.post("/api/v1/notifications/alerts", json={"alerts": "nope"})
        assert bad.status_code == 422


async def test_ticks_missed_past_their_grace_are_noted(node, worker, http, redis, dep) -> None:
    with receiver() as rec:
        await _channel(http, "miss", kind="webhook", url=rec.url)
        await _rule(http, events=["missed"], channels=["miss"], group_s=0)
        body = {"name": "hourly", "command": "true", "misfire_grace_s": 1,
                "schedule": {"type": "interval", "every_s": 3600}}  # fmt: skip
        job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
        rounds = node.follower.rounds
        await wait_until(lambda: _at_least(node.follower.rounds, rounds + 2), timeout=10)
        # as after an outage: its next tick is a minute past, its grace (1 s) long gone
        sk = dep.keys_for(job_id)
        now_ms = await redis.time_ms()
        await redis.execute("ZADD", sk.timer, "XX", now_ms - 60_000, job_id)
        await redis.execute("PUBLISH", dep.globals.wake_channel, str(sk.shard))
        await wait_until(lambda: _count(rec.bodies()), timeout=40)
        (item,) = rec.bodies()[0]["items"]
        assert item["kind"] == "missed" and item["job_id"] == job_id and item["name"] == "hourly"
        assert item["reason"].startswith("missed: 1 tick(s)")
