"""Traces of firings (issue #32, first part): the worker's spans, their parentage from the
run id alone, TRACEPARENT in a command's environment, the context in a handler, and log
lines joinable with traces. Checked with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import child_env, wait_until
from shardsched.core import trace_ids
from shardsched.core.trace_keep import KeepRule
from shardsched.runtime import trace_context
from shardsched.runtime.logs import JsonFormatter
from shardsched.runtime.tracing import RunTracer, enabled_by
from shardsched.shard.manager import ShardManager
from shardsched.worker.handlers import HandlerContext, handler
from shardsched.worker.worker import Worker
from traces import OtlpReceiver, run_spans
from workers import once_job, start_worker, wait_run

SEEN: dict[str, object] = {}


@handler("test-trace-context")
def _seen(ctx: HandlerContext) -> None:
    span = trace.get_current_span().get_span_context()
    SEEN[ctx.run_id] = (span.trace_id, span.span_id)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def traced(nursery, redis, dep, spans) -> Worker:
    w = Worker(redis, dep, worker_id="w-traced", tracer=RunTracer.for_tests(spans))
    await nursery.start(w.run)
    return w


_EXECUTE = "shardsched.execute"


def _by(spans: InMemorySpanExporter, name: str, run_id: str) -> list:
    """The spans named ``name`` of a run: its attempt and root say its id; the spans under
    its attempt (claim, execution, renewals, completion) are found by their parents."""
    return [s for s in run_spans(spans.get_finished_spans(), run_id) if s.name == name]


async def test_a_runs_spans_share_its_firings_trace(node, traced, http, spans, tmp_path) -> None:
    out = tmp_path / "tp"
    body = {
        "name": "traced",
        "command": f"printenv TRACEPARENT > {out}; exit 1",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "retry_policy": {"max_attempts": 2, "base_s": 0, "jitter": False},
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def dead() -> list | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs if any(r["state"] == "dead_letter" for r in runs) else None

    runs = await wait_until(dead, timeout=20)
    second = next(r["run_id"] for r in runs if r["state"] == "dead_letter")
    first = trace_ids.previous_attempt(second)
    assert first is not None
    await wait_until(lambda: _emitted(spans, second))
    trace_id = trace_ids.trace_id(second)
    assert trace_id == trace_ids.trace_id(first)
    (root,) = [s for s in spans.get_finished_spans() if s.name == "shardsched.firing"]
    assert root.parent is None and root.context.trace_id == trace_id
    assert root.context.span_id == trace_ids.firing_span_id(second)
    assert root.attributes["shardsched.state"] == "dead_letter"
    assert not root.status.is_ok
    assert "shardsched.claim_ms" not in root.attributes  # the attempt's, not the root's
    for run_id in (first, second):
        (attempt,) = _by(spans, "shardsched.attempt", run_id)
        assert attempt.context.span_id == trace_ids.attempt_span_id(run_id)
        assert attempt.parent.span_id == root.context.span_id
        (execute,) = _by(spans, "shardsched.execute", run_id)
        assert execute.parent.span_id == attempt.context.span_id
        assert execute.context.trace_id == trace_id
        assert set(execute.attributes) == {"process.exit_code", "shardsched.delivery"}  # own only
        assert execute.attributes["process.exit_code"] == 1
        assert attempt.attributes["shardsched.worker_id"] == "w-traced"
        assert attempt.attributes["shardsched.attempt"] == int(run_id.rsplit(":", 1)[1])
        assert attempt.attributes["shardsched.run_id"] == run_id
    (again,) = _by(spans, "shardsched.attempt", second)
    assert [link.context.span_id for link in again.links] == [trace_ids.attempt_span_id(first)]
    # the job's TRACEPARENT names its execution's span (the second attempt wrote last)
    (execute,) = _by(spans, "shardsched.execute", second)
    want = trace_ids.traceparent(trace_id, execute.context.span_id, True)
    assert out.read_text().strip() == want


async def _emitted(spans: InMemorySpanExporter, run_id: str) -> bool:
    return any(s.name == "shardsched.firing" for s in spans.get_finished_spans())


async def test_a_handler_runs_in_its_executions_context(node, traced, http, spans) -> None:
    body = {"name": "h", "command": "handler:test-trace-context",
            "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"}}  # fmt: skip
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    await wait_until(lambda: _emitted(spans, job_id))
    (execute,) = [s for s in spans.get_finished_spans() if s.name == "shardsched.execute"]
    (attempt,) = [s for s in spans.get_finished_spans() if s.name == "shardsched.attempt"]
    assert execute.parent.span_id == attempt.context.span_id
    run_id = attempt.attributes["shardsched.run_id"]
    assert run_id.startswith(job_id)
    assert SEEN[run_id] == (execute.context.trace_id, execute.context.span_id)


def test_log_lines_carry_the_current_span(spans: InMemorySpanExporter) -> None:
    tracer = RunTracer.for_tests(spans)
    context = ("job_x:1000:1", 7)  # an unsampled run's (worker/spans.py start)
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "hello", None, None)
    with trace_context.current(context):  # an unsampled run's logs join its trace, if kept
        line = json.loads(JsonFormatter().format(record))
        parent = trace_context.current_traceparent()
    assert parent is not None and parent.endswith("-00")  # a job's own tracer records not
    with trace_context.current(tracer.execution("job_x:1000:1", 7)):
        assert (trace_context.current_traceparent() or "").endswith("-01")
    assert line["trace_id"] == f"{trace_ids.trace_id('job_x:1000:1'):032x}"
    assert line["span_id"] == f"{trace_ids.delivery_span_id('job_x:1000:1', 7):016x}"
    assert "trace_id" not in json.loads(JsonFormatter().format(record))


def test_tracing_is_on_only_when_the_environment_asks() -> None:
    assert not enabled_by({})
    assert enabled_by({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert enabled_by({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not enabled_by({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert not enabled_by({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert RunTracer.from_env("x", {}) is None


def test_ids_are_the_same_in_every_process_and_differ_per_delivery() -> None:
    run = "job_a:5000:1"
    assert trace_ids.trace_id(run) == trace_ids.trace_id("job_a:5000:3")
    assert trace_ids.trace_id(run) != trace_ids.trace_id("job_a:6000:1")
    assert trace_ids.trace_id("dag_x.a:5000:1") == trace_ids.trace_id("dag_x.b:5000:2")
    assert trace_ids.delivery_span_id(run, 1001) != trace_ids.delivery_span_id(run, 2002)
    assert trace_ids.previous_attempt(run) is None


async def test_a_worker_process_exports_over_otlp_http(node, redis_server, redis, dep, tmp_path):
    receiver = OtlpReceiver()
    env = {
        **child_env(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    proc = start_worker(redis_server.url, dep.namespace, "w-otlp", tmp_path / "w.log", env=env)
    try:
        job_id = await once_job(redis, dep, "true", lease_s=10)
        runs = await wait_run(redis, dep, job_id, "succeeded", timeout=30)

        async def exported() -> bool:
            return {"shardsched.firing", "shardsched.attempt", "shardsched.execute"} <= {
                s["name"] for s in receiver.got
            }

        await wait_until(exported, timeout=20)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        receiver.close()
    assert {s["path"] for s in receiver.got} == {"/v1/traces"}
    assert {s["trace_id"] for s in receiver.got} == {trace_ids.trace_id(runs[0].run_id)}
    assert {s["service"] for s in receiver.got} == {"shardsched-worker"}


@pytest.fixture
async def traced_node(nursery, redis, dep, spans) -> ShardManager:
    manager = ShardManager(
        redis, dep, node_id="n-traced", renew_every_s=0.5, tracer=RunTracer.for_tests(spans)
    )
    await nursery.start(manager.run)
    return manager


def _named(spans: InMemorySpanExporter, name: str) -> list:
    return [s for s in spans.get_finished_spans() if s.name == name]


async def test_the_nodes_fire_and_the_workers_claim_and_completion_join_the_trace(
    traced_node, traced, http, spans
) -> None:
    body = {
        "name": "ok",
        "command": "true",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]
    await wait_until(lambda: _emitted(spans, job_id))
    (root,) = _named(spans, "shardsched.firing")
    run_id = root.attributes["shardsched.run_id"]
    trace = trace_ids.trace_id(run_id)
    assert root.context.trace_id == trace and root.attributes["shardsched.state"] == "succeeded"
    (fire,) = [s for s in _named(spans, "shardsched.fire") if s.context.trace_id == trace]
    assert fire.parent.span_id == root.context.span_id
    assert fire.attributes["shardsched.epoch"] >= 1
    assert fire.attributes["shardsched.shard"] == traced_node.dep.keys_for(job_id).shard
    (attempt,) = _by(spans, "shardsched.attempt", run_id)
    (execute,) = _by(spans, "shardsched.execute", run_id)
    assert execute.parent.span_id == attempt.context.span_id
    assert execute.context.trace_id == trace
    # the claim and completion calls: the attempt's two ends, their own time attributes
    assert attempt.start_time <= execute.start_time and execute.end_time <= attempt.end_time
    assert attempt.attributes["shardsched.claim_ms"] >= 0
    assert attempt.attributes["shardsched.complete_ms"] >= 0
    names = {s.name for s in spans.get_finished_spans() if s.context.trace_id == trace}
    assert names == {"shardsched.firing", "shardsched.fire", "shardsched.attempt", _EXECUTE}


async def test_an_owner_never_idle_still_makes_its_fire_spans(traced_node, http, spans) -> None:
    """240 jobs every second, phases spread over it: every shard has a tick within the
    lookahead at every moment, so its owner is never idle. Its fire spans are made while
    it waits for each next tick (a steady 830/s exported 12 - 20 % of them when they
    waited for an idle owner, which never came)."""
    start_ms = await traced_node.redis.time_ms() + 1000
    for i in range(240):
        at = (start_ms + i * 1000 // 240) / 1000
        body = {
            "name": f"dense-{i}",
            "command": "true",  # no worker: the runs only queue, the owners only fire
            "schedule": {"type": "interval", "every_s": 1, "start_at": _rfc3339(at)},
        }
        assert (await http.post("/api/v1/jobs", json=body)).status_code == 201

    def fired() -> int:
        return sum(o.actor.fired_total for o in traced_node.owned.values())

    async def three_seconds_fired() -> bool:
        return fired() >= 720

    await wait_until(three_seconds_fired, timeout=30)
    made = len(_named(spans, "shardsched.fire"))
    assert made >= 0.8 * (fired() - 240), (made, fired())  # all but the last second's


def _rfc3339(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


async def test_renewals_nest_under_their_delivery_and_a_cancelled_run_ends_its_firing(
    traced_node, traced, http, spans
) -> None:
    body = {"name": "long", "command": "sleep 30", "lease_s": 1,
            "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"}}  # fmt: skip
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def renewed_twice() -> str | None:  # noted on the held run, made only at its end
        for c in traced.holdings.leased():
            if c.trace and sum(name == "shardsched.renew" for name, *_ in c.trace.spans) >= 2:
                return c.run_id
        return None

    run_id = await wait_until(renewed_twice, timeout=20)
    assert run_id.startswith(job_id) and not _named(spans, "shardsched.renew")
    cancelled = await http.post(f"/api/v1/runs/{run_id}/cancel", json={"reason": "enough"})
    assert cancelled.status_code == 200, cancelled.text
    await wait_until(lambda: _emitted(spans, job_id), timeout=20)
    (root,) = _named(spans, "shardsched.firing")
    assert root.context.span_id == trace_ids.firing_span_id(run_id)
    assert root.attributes["shardsched.state"] == "cancelled"

    async def executed() -> list:  # the worker's own spans, made once the execution ends
        return _by(spans, "shardsched.execute", run_id)

    await wait_until(executed, timeout=20)
    (execute,) = _by(spans, "shardsched.execute", run_id)
    token = execute.attributes["shardsched.delivery"]
    renewals = _by(spans, "shardsched.renew", run_id)
    assert len(renewals) >= 2
    assert {r.parent.span_id for r in renewals} == {trace_ids.delivery_span_id(run_id, token)}


async def test_a_dag_run_is_one_trace_with_a_span_per_task(
    traced_node, traced, http, spans
) -> None:
    dag = {
        "name": "etl",
        "schedule": {"type": "cron", "expression": "30 2 * * *"},
        "tasks": [
            {"name": "extract", "command": "true"},
            {"name": "load", "command": "true", "depends_on": ["extract"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=dag)).json()["dag_id"]
    drid = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()["dag_run_id"]
    await wait_until(lambda: _emitted(spans, drid), timeout=20)
    (root,) = _named(spans, "shardsched.firing")
    assert root.attributes["shardsched.dag_run_id"] == drid
    assert root.attributes["shardsched.state"] == "succeeded"
    tasks = _named(spans, "shardsched.task")
    assert sorted(t.attributes["shardsched.job_id"] for t in tasks) == [
        f"{dag_id}.extract",
        f"{dag_id}.load",
    ]
    for task in tasks:
        assert task.parent.span_id == root.context.span_id
        assert task.context.trace_id == root.context.trace_id
        run_id = task.attributes["shardsched.run_id"]
        (attempt,) = _by(spans, "shardsched.attempt", run_id)
        assert attempt.parent.span_id == task.context.span_id


async def test_an_unsampled_firing_that_ends_well_costs_no_span_anywhere(
    nursery, redis, dep, http
) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    spans = InMemorySpanExporter()
    ends_well = KeepRule(late_ms=0)  # due in 2020: late, unless lateness keeps nothing
    tracer = RunTracer.for_tests(spans, sampler=ALWAYS_OFF, keep=ends_well)
    manager = ShardManager(redis, dep, node_id="n-off", renew_every_s=0.5, tracer=tracer)
    await nursery.start(manager.run)
    w = Worker(redis, dep, worker_id="w-off", tracer=tracer)
    await nursery.start(w.run)
    body = {
        "name": "ok",
        "command": "true",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def done() -> bool:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return bool(runs) and runs[0]["state"] == "succeeded"

    await wait_until(done, timeout=20)
    assert spans.get_finished_spans() == ()


async def test_a_runs_page_names_its_trace(node, worker, http, monkeypatch) -> None:
    body = {
        "name": "t",
        "command": "true",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
    }
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def ran() -> str | None:
        runs = (await http.get(f"/api/v1/jobs/{job_id}/runs")).json()["runs"]
        return runs[0]["run_id"] if runs else None

    run_id = await wait_until(ran)
    got = (await http.get(f"/api/v1/runs/{run_id}")).json()
    assert got["trace_id"] == f"{trace_ids.trace_id(run_id):032x}" and got["trace_url"] is None
    monkeypatch.setenv("SHARDSCHED_TRACE_URL", "http://127.0.0.1:16686/trace/{trace_id}")
    got = (await http.get(f"/api/v1/runs/{run_id}")).json()
    assert got["trace_url"] == f"http://127.0.0.1:16686/trace/{got['trace_id']}"
