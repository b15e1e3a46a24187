"""The worker's spans of a run (runtime/tracing.py): its claim and its completion (the
script calls, under the attempt), one per delivery while it executes, with a span per
lease renewal under it, then, once Redis applied its completion, its attempt's and, when
the run ended for good, its firing's (a DAG task's: its task's). Nothing here runs when
tracing is off (the tracer is None)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from shardsched.core import trace_ids
from shardsched.core.ids import dag_run_of, job_of_run
from shardsched.runtime.tracing import RunTracer

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from shardsched.worker.holdings import Claimed, Finished
    from shardsched.worker.runner import Outcome


def run_attributes(claimed: Claimed, worker_id: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "shardsched.run_id": claimed.run_id,
        "shardsched.job_id": job_of_run(claimed.run_id),
        "shardsched.attempt": claimed.attempt,
        "shardsched.shard": claimed.shard,
        "shardsched.worker_id": worker_id,
    }
    if drid := dag_run_of(claimed.run_id):
        attributes["shardsched.dag_run_id"] = drid
    return attributes


def start(tracer: RunTracer | None, claimed: Claimed, worker_id: str) -> Span | None:
    """The execution span of this delivery (None: tracing is off)."""
    if tracer is None or not tracer.samples(claimed.run_id):
        return None
    attributes = run_attributes(claimed, worker_id)
    return tracer.start_delivery(
        claimed.run_id, claimed.delivery.token, attributes, claimed.server_ms()
    )


def end(span: Span | None, outcome: Outcome | None, end_ms: int) -> None:
    """End an execution span with what became of it (None: lost or cancelled here)."""
    if span is None:
        return
    from opentelemetry.trace import Status, StatusCode

    if outcome is None:
        span.set_status(Status(StatusCode.ERROR, "stopped: lease lost or cancelled"))
    else:
        if outcome.exit_code is not None:
            span.set_attribute("process.exit_code", outcome.exit_code)
        if not outcome.succeeded:
            span.set_status(Status(StatusCode.ERROR, outcome.reason or "failed"))
    span.end(end_time=end_ms * 1_000_000)


def completed(
    tracer: RunTracer | None,
    f: Finished,
    state: str,
    final: bool,
    worker_id: str,
    now_ms: int,
    took_ms: int,
) -> None:
    """Redis applied this completion (the call took ``took_ms``): its span, the attempt's,
    and the firing's if the run ended for good."""
    if tracer is None or not tracer.samples(f.claimed.run_id):
        return
    c = f.claimed
    attributes = {**run_attributes(c, worker_id), "shardsched.state": state}
    error = None if state == "succeeded" else (f.outcome.reason or state)
    attempt = trace_ids.attempt_span_id(c.run_id)
    tracer.child("shardsched.complete", c.run_id, attempt, attributes, now_ms - took_ms, now_ms)
    tracer.attempt_ended(c.run_id, attributes, c.claimed_ms - c.claim_took_ms, now_ms, error)
    if final:
        tracer.firing_ended(c.run_id, attributes, c.scheduled_for_ms, now_ms, state)


def claimed(
    tracer: RunTracer, runs: list[Claimed], worker_id: str, started: float
) -> list[Claimed]:
    """The claim call that delivered ``runs`` (begun at trio's ``started``), under each
    attempt; returns the runs knowing how long it took (their attempt starts with it)."""
    took_ms = round((trio.current_time() - started) * 1000)
    out = []
    for c in runs:
        if not tracer.samples(c.run_id):
            out.append(c)
            continue
        c = c._replace(claim_took_ms=took_ms)
        out.append(c)
        attributes = {**run_attributes(c, worker_id), "shardsched.delivery": c.delivery.token}
        tracer.child(
            "shardsched.claim",
            c.run_id,
            trace_ids.attempt_span_id(c.run_id),
            attributes,
            c.claimed_ms - took_ms,
            c.claimed_ms,
        )
    return out


def renewed(tracer: RunTracer, c: Claimed, worker_id: str, took_ms: int, error: str | None) -> None:
    """A lease renewal of a delivery (the call took ``took_ms``), under its execution."""
    if not tracer.samples(c.run_id):
        return
    end = c.server_ms()
    tracer.child(
        "shardsched.renew",
        c.run_id,
        trace_ids.delivery_span_id(c.run_id, c.delivery.token),
        run_attributes(c, worker_id),
        end - took_ms,
        end,
        error,
    )
