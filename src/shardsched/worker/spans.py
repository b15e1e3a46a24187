"""The worker's spans of a run (runtime/tracing.py): one per delivery while it executes,
then, once Redis applied its completion, its attempt's and, when the run ended for good,
its firing's. Nothing here runs when tracing is off (the tracer is None)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    if tracer is None:
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
    tracer: RunTracer | None, f: Finished, state: str, final: bool, worker_id: str, now_ms: int
) -> None:
    """Redis applied this completion: the attempt's span, and the firing's if it ended."""
    if tracer is None:
        return
    c = f.claimed
    attributes = {**run_attributes(c, worker_id), "shardsched.state": state}
    error = None if state == "succeeded" else (f.outcome.reason or state)
    tracer.attempt_ended(c.run_id, attributes, c.claimed_ms, now_ms, error)
    if final:
        tracer.firing_ended(c.run_id, attributes, c.scheduled_for_ms, now_ms, state)
