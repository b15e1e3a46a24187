"""Traces of every failure at any sampling rate (#54): an unsampled run's spans are noted
and made only when its end keeps them (core/trace_keep). Judged by what the ledger says
became of each run (its state and attempts, read over the API: not the tracer's own
decision), against what reached an in-memory exporter and a real OTLP/HTTP receiver."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from conftest import child_env, shardsched_cmd, wait_until
from shardsched.core import trace_ids
from shardsched.core.trace_keep import REASONS, KeepRule
from shardsched.runtime.tracing import RunTracer
from shardsched.shard.manager import ShardManager
from shardsched.worker.handlers import HandlerContext, handler
from shardsched.worker.worker import Worker
from traces import OtlpReceiver, run_spans
from workers import start_worker


def test_the_rule_is_read_from_the_environment() -> None:
    assert KeepRule.from_env({}) == KeepRule(frozenset(REASONS), 60_000, 300_000)
    assert KeepRule.from_env({"SHARDSCHED_TRACES_KEEP": "none"}).reasons == frozenset()
    rule = KeepRule.from_env(
        {"SHARDSCHED_TRACES_KEEP": " Failed, slow ", "SHARDSCHED_TRACES_SLOW_MS": "1500"}
    )
    assert rule == KeepRule(frozenset({"failed", "slow"}), 60_000, 1500)
    assert KeepRule.from_env({"SHARDSCHED_TRACES_LATE_MS": " 0 "}).late_ms == 0
    assert KeepRule.from_env({"SHARDSCHED_TRACES_KEEP": " NONE "}).reasons == frozenset()


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("KEEP", "failed,errors", "unknown 'errors'"),
        ("KEEP", "", "is empty"),
        ("KEEP", "  ", "is empty"),
        ("KEEP", ",", "an empty item"),
        ("KEEP", "failed,,slow", "an empty item"),
        ("KEEP", "failed,", "an empty item"),
        ("KEEP", "none,failed", "none keeps nothing and goes alone"),
        ("KEEP", "failed;slow", "unknown 'failed;slow'"),
        ("LATE_MS", "1.5", "not a whole number"),
        ("LATE_MS", "", "not a whole number"),
        ("LATE_MS", "+5", "not a whole number"),
        ("LATE_MS", "1_000", "not a whole number"),
        ("LATE_MS", "\u0665", "not a whole number"),  # ARABIC-INDIC FIVE: int() takes it
        ("LATE_MS", "1e3", "not a whole number"),
        ("SLOW_MS", "-1", "not a whole number"),
        ("SLOW_MS", "99999999999999999999", "more than a year"),
    ],
)
def test_a_bad_value_is_refused_with_the_reason(name: str, value: str, said: str) -> None:
    with pytest.raises(ValueError, match=f"SHARDSCHED_TRACES_{name}.*{said}"):
        KeepRule.from_env({f"SHARDSCHED_TRACES_{name}": value})


@pytest.mark.parametrize(
    "command",
    [["node", "--redis", "redis://127.0.0.1:9"], ["worker", "--redis", "redis://127.0.0.1:9"],
     ["dev"]],
)  # fmt: skip
def test_a_bad_rule_stops_a_process_with_one_line(command: list[str], tmp_path) -> None:
    """Traced or not, a bad value stops node, worker and dev before they start anything,
    with one line (no traceback; dev does not start a worker to restart forever)."""
    if command == ["dev"]:
        command = ["dev", "--data-dir", str(tmp_path / "data"), "--http", "127.0.0.1:9"]
    for traced in ({}, {"OTEL_TRACES_EXPORTER": "console"}):
        env = {**child_env(), **traced, "SHARDSCHED_TRACES_KEEP": "none,failed"}
        done = subprocess.run(
            shardsched_cmd(*command), env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 1, done
        assert done.stderr.splitlines() == [
            "shardsched: SHARDSCHED_TRACES_KEEP: none keeps nothing and goes alone,"
            " not with 'none,failed'"
        ], done.stderr
    assert not (tmp_path / "data").exists()


def test_the_samplers_decision_is_the_sdks() -> None:
    """The tracer decides a ratio sampler's question by one comparison: held to the SDK's
    own should_sample on 20,000 random trace ids, for every sampler the variables name."""
    import random

    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_ON,
        ParentBased,
        TraceIdRatioBased,
    )

    rng = random.Random(54)
    samplers = [
        ParentBased(TraceIdRatioBased(0.01)),
        TraceIdRatioBased(0.3),
        ParentBased(TraceIdRatioBased(0.0)),
        TraceIdRatioBased(1.0),
        ALWAYS_ON,
        ALWAYS_OFF,
        ParentBased(ALWAYS_OFF),
    ]
    for sampler in samplers:
        tracer = RunTracer.for_tests(InMemorySpanExporter(), sampler=sampler)
        for _ in range(20_000 // len(samplers)):
            trace = rng.getrandbits(128) or 1
            sdk = sampler.should_sample(None, trace, "shardsched.firing").decision.is_sampled()
            assert tracer.sampled(trace) == sdk, (sampler.get_description(), trace)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


async def _unsampled(
    nursery, redis, dep, spans, keep: KeepRule | None = None, worker: bool = True
) -> RunTracer:
    """A node and a worker whose sampler samples nothing."""
    tracer = RunTracer.for_tests(spans, sampler=ALWAYS_OFF, keep=keep)
    manager = ShardManager(redis, dep, node_id="n-tail", renew_every_s=0.5, tracer=tracer)
    await nursery.start(manager.run)
    if worker:
        await nursery.start(Worker(redis, dep, worker_id="w-tail", tracer=tracer).run)
    return tracer


def _soon() -> str:
    return (datetime.now(UTC) + timedelta(seconds=1)).isoformat()


async def _ended(
    http, job_id: str, states: tuple[str, ...] = ("succeeded", "dead_letter", "failed")
) -> list[dict]:
    async def ended() -> list[dict] | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs if runs and runs[0]["state"] in states else None

    return await wait_until(ended, timeout=30)


def _of(spans: InMemorySpanExporter, run_id: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in run_spans(spans.get_finished_spans(), run_id):
        out.setdefault(s.name, []).append(s)
    return out


async def test_an_unsampled_failure_has_its_whole_trace_and_a_success_none(
    nursery, redis, dep, http, spans
) -> None:
    await _unsampled(nursery, redis, dep, spans)
    failing = {"name": "bad", "command": "echo no; exit 3",
               "schedule": {"type": "once", "at": _soon()},
               "retry_policy": {"max_attempts": 2, "base_s": 0, "jitter": False}}  # fmt: skip
    fine = {"name": "fine", "command": "true", "schedule": {"type": "once", "at": _soon()}}
    bad_id = (await http.post("/api/v1/jobs", json=failing)).json()["job_id"]
    ok_id = (await http.post("/api/v1/jobs", json=fine)).json()["job_id"]
    bad_runs = await _ended(http, bad_id, ("dead_letter",))
    ok_runs = await _ended(http, ok_id)
    assert [r["state"] for r in bad_runs] == ["dead_letter", "failed"]  # the ledger's word
    assert ok_runs[0]["state"] == "succeeded"

    async def root() -> list:
        return [s for s in spans.get_finished_spans() if s.name == "shardsched.firing"]

    (firing,) = await wait_until(root, timeout=20)
    last, first = bad_runs[0]["run_id"], bad_runs[1]["run_id"]
    assert firing.context.trace_id == trace_ids.trace_id(last)
    assert firing.attributes["shardsched.state"] == "dead_letter" and not firing.status.is_ok
    for run_id in (first, last):
        got = _of(spans, run_id)
        assert sorted(set(got) - {"shardsched.firing"}) == [
            "shardsched.attempt",
            "shardsched.execute",
        ], run_id
        (attempt,) = got["shardsched.attempt"]
        assert attempt.attributes["shardsched.kept"] == "failed"
        assert {"shardsched.claim_ms", "shardsched.complete_ms"} <= set(attempt.attributes)
        assert not attempt.status.is_ok
        (execute,) = got["shardsched.execute"]
        assert execute.attributes["process.exit_code"] == 3
        assert execute.parent.span_id == attempt.context.span_id
    (second,) = _of(spans, last)["shardsched.attempt"]
    assert second.links[0].context.span_id == trace_ids.attempt_span_id(first)
    # the owner's fire span is not there: it was written before the end was known
    assert not [s for s in spans.get_finished_spans() if s.name == "shardsched.fire"]
    assert _of(spans, ok_runs[0]["run_id"]) == {}
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {firing.context.trace_id}


async def test_a_late_run_and_a_slow_one_keep_theirs(nursery, redis, dep, http, spans) -> None:
    keep = KeepRule(late_ms=1_500, slow_ms=1_000)
    tracer = await _unsampled(nursery, redis, dep, spans, keep, worker=False)
    jobs = {
        "late": {"command": "true", "queue": "later"},
        "slow": {"command": "sleep 1.5"},
        "quick": {"command": "sleep 0.1"},
    }
    ids = {}
    for name, body in jobs.items():
        body = {"name": name, "schedule": {"type": "once", "at": _soon()}, **body}
        ids[name] = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    await nursery.start(Worker(redis, dep, worker_id="w-now", tracer=tracer).run)

    async def queued_long() -> bool:  # no worker serves "later" yet: the run waits
        runs = (await http.get(f"/api/v1/jobs/{ids['late']}/runs")).json()["runs"]
        if not runs:
            return False
        got = (await http.get(f"/api/v1/runs/{runs[0]['run_id']}")).json()
        waited = datetime.now(UTC) - datetime.fromisoformat(got["scheduled_for"])
        return waited > timedelta(milliseconds=2_000)

    await wait_until(queued_long, timeout=20)
    late_worker = Worker(redis, dep, worker_id="w-late", tracer=tracer, queues=["later"])
    await nursery.start(late_worker.run)
    runs = {name: (await _ended(http, job_id))[0] for name, job_id in ids.items()}
    assert {r["state"] for r in runs.values()} == {"succeeded"}
    for name in ("late", "slow"):
        run_id = runs[name]["run_id"]

        async def made(run_id: str = run_id) -> dict:
            return _of(spans, run_id)

        got = await wait_until(made, timeout=20)
        (attempt,) = got["shardsched.attempt"]
        assert attempt.attributes["shardsched.kept"] == name
        (root,) = [
            s
            for s in spans.get_finished_spans()
            if s.name == "shardsched.firing" and s.context.trace_id == trace_ids.trace_id(run_id)
        ]
        assert root.attributes["shardsched.state"] == "succeeded"
    (execute,) = _of(spans, runs["slow"]["run_id"])["shardsched.execute"]
    assert execute.end_time - execute.start_time > 1_000_000_000
    assert _of(spans, runs["quick"]["run_id"]) == {}


async def test_a_failed_dag_run_has_its_root_and_its_failed_task(
    nursery, redis, dep, http, spans
) -> None:
    await _unsampled(nursery, redis, dep, spans)
    dag = {
        "name": "etl",
        "schedule": {"type": "cron", "expression": "30 2 * * *"},
        "tasks": [
            {"name": "extract", "command": "true"},
            {"name": "load", "command": "exit 1", "depends_on": ["extract"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
    drid = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()["dag_run_id"]

    async def failed() -> bool:
        got = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
        return got["state"] == "failed"

    await wait_until(failed, timeout=30)

    async def root() -> list:
        return [s for s in spans.get_finished_spans() if s.name == "shardsched.firing"]

    (firing,) = await wait_until(root, timeout=20)
    assert firing.attributes["shardsched.dag_run_id"] == drid
    assert firing.attributes["shardsched.state"] == "failed"
    assert firing.attributes["shardsched.kept"] == "failed"  # unsampled: kept, and says so
    tasks = [s for s in spans.get_finished_spans() if s.name == "shardsched.task"]
    assert [t.attributes["shardsched.job_id"] for t in tasks] == [f"{dag_id}.load"]
    assert tasks[0].parent.span_id == firing.context.span_id
    # a triggered DAG run's root spans from when it was scheduled: around its tasks
    assert firing.start_time <= tasks[0].start_time and firing.end_time >= tasks[0].end_time
    assert firing.end_time > firing.start_time


async def test_a_run_cancelled_while_running_has_its_attempt_and_root(
    nursery, redis, dep, http, spans, caplog
) -> None:
    """Nobody completes a cancelled run: its worker ends its attempt (cancelled) and the
    owner its firing's root, unsampled, both kept as failures; the worker's line about it
    carries the run's trace id."""
    await _unsampled(nursery, redis, dep, spans)
    body = {"name": "long", "command": "sleep 60", "schedule": {"type": "once", "at": _soon()}}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    (run,) = await _ended(http, job_id, ("running",))
    run_id = run["run_id"]
    assert (await http.post(f"/api/v1/runs/{run_id}/cancel")).status_code == 200
    assert (await _ended(http, job_id, ("cancelled",)))[0]["state"] == "cancelled"

    async def made() -> dict | None:
        got = _of(spans, run_id)
        return got if {"shardsched.attempt", "shardsched.firing"} <= set(got) else None

    got = await wait_until(made, timeout=30)
    (attempt,) = got["shardsched.attempt"]
    assert attempt.attributes["shardsched.state"] == "cancelled" and not attempt.status.is_ok
    assert attempt.attributes["shardsched.kept"] == "failed"
    (execute,) = got["shardsched.execute"]
    assert execute.status.description == "cancelled"
    assert execute.parent.span_id == attempt.context.span_id
    (root,) = got["shardsched.firing"]
    assert root.attributes["shardsched.state"] == "cancelled"
    assert root.attributes["shardsched.kept"] == "failed"
    assert attempt.parent.span_id == root.context.span_id
    (line,) = [r for r in caplog.records if "was cancelled" in r.getMessage()]
    from shardsched.runtime.logs import JsonFormatter

    said = json.loads(JsonFormatter().format(line))
    assert said["run_id"] == run_id
    assert said["trace_id"] == f"{trace_ids.trace_id(run_id):032x}"


async def test_a_worker_process_sampling_nothing_exports_its_failures(
    node, redis_server, http, dep, tmp_path
) -> None:
    receiver = OtlpReceiver()
    env = {
        **child_env(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_TRACES_SAMPLER": "always_off",
    }
    proc = start_worker(redis_server.url, dep.namespace, "w-tail", tmp_path / "w.log", env=env)
    try:
        ids = {}
        for name, command in [("bad", "exit 7"), ("good", "true")]:
            body = {"name": name, "command": command, "schedule": {"type": "once", "at": _soon()}}
            ids[name] = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
        bad = (await _ended(http, ids["bad"]))[0]
        good = (await _ended(http, ids["good"]))[0]
        assert bad["state"] in ("failed", "dead_letter") and good["state"] == "succeeded"

        async def exported() -> bool:
            return any(
                s["name"] == "shardsched.firing" and s["run_id"] == bad["run_id"]
                for s in receiver.got
            )

        await wait_until(exported, timeout=20)
    finally:
        proc.terminate()  # its tracer's shutdown exports whatever it still held
        proc.wait(timeout=20)
        receiver.close()
    assert {s["trace_id"] for s in receiver.got} == {trace_ids.trace_id(bad["run_id"])}
    assert {s["run_id"] for s in receiver.got} == {bad["run_id"], ""}  # children say none
    assert {s["name"] for s in receiver.got} >= {"shardsched.attempt", "shardsched.execute"}


_STALL: dict[str, object] = {}  #: what the stalling handler needs: a Redis URL, run keys


@handler("test-trace-stalled")
def _stalled(ctx: HandlerContext) -> None:
    """Runs while its lease goes to another delivery, as a stalled worker's would: the
    run's delivery token in Redis is no longer this one, so its completion is refused."""
    import redis as redis_py

    client = redis_py.Redis.from_url(str(_STALL["url"]))
    try:
        client.hset(_STALL["run_key"](ctx.run_id), "dt", "424242")  # type: ignore[operator]
    finally:
        client.close()


async def test_a_lost_execution_whose_completion_is_refused_is_kept(
    nursery, redis, redis_server, dep, http, spans
) -> None:
    """A worker that finishes a run whose lease went elsewhere meanwhile (a stall) gets
    its completion refused; its execution is still exported, kept as a failure."""
    _STALL.update(url=redis_server.url, run_key=lambda rid: dep.keys_for(rid).run(rid))
    await _unsampled(nursery, redis, dep, spans)
    body = {"name": "stall", "command": "handler:test-trace-stalled",
            "schedule": {"type": "once", "at": _soon()}}  # fmt: skip
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    (run,) = await _ended(http, job_id, ("running",))

    async def executed() -> dict | None:
        got = _of(spans, run["run_id"])
        return got if "shardsched.execute" in got else None

    got = await wait_until(executed, timeout=20)
    (execute,) = got["shardsched.execute"]
    assert execute.parent.span_id == trace_ids.attempt_span_id(run["run_id"])
    assert "shardsched.attempt" not in got  # the attempt goes on with the other delivery
