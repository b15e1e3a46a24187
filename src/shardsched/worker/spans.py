"""The worker's spans of a run (runtime/tracing.py): one per delivery while it executes,
with a span per lease renewal under it, then, once Redis applied its completion, its
attempt's (from its claim call's start to its completion call's end, each call's own
time an attribute) and, when the run ended for good, its firing's (a DAG task's: its
task's).

Every run's spans are noted as it goes, as plain numbers on its Claimed (``trace``), and
made only at its end, when its firing was sampled or its end keeps it
(core/trace_keep: failed, retried, redelivered, late, slow): a run that ends well and
was not sampled costs a few tuples, and every failure has its trace. Nothing here runs
when tracing is off (the tracer is None)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardsched.core import trace_ids
from shardsched.core.ids import dag_run_of, job_of_run
from shardsched.runtime.tracing import RunTracer
from shardsched.worker.trace_notes import Notes

if TYPE_CHECKING:
    from shardsched.worker.holdings import Claimed, Finished
    from shardsched.worker.runner import Outcome

#: renewals noted a delivery at most (a day-long run renews thousands of times)
MAX_RENEWALS = 100
_EXECUTE = "shardsched.execute"
_NONE: dict[str, Any] = {}


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


def noted(tracer: RunTracer, run_id: str, again: bool = False) -> Notes:
    """A claimed run's notes: its trace and whether its firing was sampled, decided once
    (the claim call's own timing is on its Claimed, an attribute of its attempt);
    ``again``: a run taken up, executed again after its process died."""
    trace = trace_ids.trace_id(run_id)
    return Notes(trace, tracer.sampled(trace), again)


def start(tracer: RunTracer | None, claimed: Claimed) -> Any:
    """The context this delivery executes in (None: tracing is off)."""
    notes = claimed.trace
    if tracer is None or notes is None:
        return None
    if notes.sampled:
        return tracer.execution(claimed.run_id, claimed.delivery.token)
    return (claimed.run_id, claimed.delivery.token)  # ids made if a log line asks


def end(
    tracer: RunTracer | None,
    claimed: Claimed,
    started_ms: int,
    outcome: Outcome | None,
    end_ms: int,
) -> None:
    """Note the execution with what became of it (None: lost or cancelled here)."""
    notes = claimed.trace
    if tracer is None or notes is None:
        return
    extra: dict[str, Any] | None = None
    error = None
    if notes.cancelled:
        error = "cancelled"
    elif outcome is None:
        error = "stopped: lease lost"
    else:
        if outcome.exit_code is not None:
            extra = {"process.exit_code": outcome.exit_code}
        if not outcome.succeeded:
            error = outcome.reason or "failed"
    notes.spans.append((_EXECUTE, started_ms, end_ms, error, extra))


def cancelled(claimed: Claimed) -> None:
    """Redis said the run was cancelled while it ran (a lease renewal's answer)."""
    if claimed.trace is not None:
        claimed.trace.cancelled = True


def stopped(
    tracer: RunTracer | None, claimed: Claimed, worker_id: str, started_ms: int, now_ms: int
) -> None:
    """The delivery was lost or cancelled here, or its completion was refused (its lease
    went elsewhere meanwhile): its noted spans are made now if kept (as a failure). A
    cancelled run's attempt ends here too (nobody else ends it; the owner's follower
    ends the firing's root); a lost one's attempt goes on elsewhere."""
    notes = claimed.trace
    if tracer is None or notes is None:
        return
    state = "cancelled" if notes.cancelled else "lost"
    kept = _kept(tracer, claimed, state, started_ms)
    if kept is None:
        return
    _made(tracer, claimed)
    if notes.cancelled:
        attributes = {**run_attributes(claimed, worker_id), **kept}
        attributes["shardsched.state"] = state
        attributes["shardsched.claim_ms"] = claimed.claim_took_ms
        start_ms = claimed.claimed_ms - claimed.claim_took_ms
        tracer.attempt_ended(claimed.run_id, attributes, start_ms, now_ms, state)


def renewed(tracer: RunTracer, c: Claimed, took_ms: int, error: str | None) -> None:
    """Note a lease renewal of a delivery (the call took ``took_ms``)."""
    if c.trace is None or len(c.trace.spans) > MAX_RENEWALS + 1:
        return
    end_ms = c.server_ms()
    c.trace.spans.append(("shardsched.renew", end_ms - took_ms, end_ms, error, None))


def completed(
    tracer: RunTracer | None,
    f: Finished,
    state: str,
    final: bool,
    worker_id: str,
    now_ms: int,
    took_ms: int,
) -> None:
    """Redis applied this completion (the call took ``took_ms``): if the run is kept, its
    noted spans, its completion's, its attempt's and the firing's if it ended for good."""
    c = f.claimed
    if tracer is None or c.trace is None:
        return
    kept = _kept(tracer, c, state, f.started_ms)
    if kept is None:
        return
    attributes = {**run_attributes(c, worker_id), **kept, "shardsched.state": state}
    _made(tracer, c)
    if final:
        tracer.firing_ended(c.run_id, attributes, c.scheduled_for_ms, now_ms, state)
    attributes["shardsched.claim_ms"] = c.claim_took_ms  # the calls' own time: the
    attributes["shardsched.complete_ms"] = took_ms  # attempt's ends, not spans of their own
    error = None if state == "succeeded" else (f.outcome.reason or state)
    tracer.attempt_ended(c.run_id, attributes, c.claimed_ms - c.claim_took_ms, now_ms, error)


def _kept(tracer: RunTracer, c: Claimed, state: str, started_ms: int) -> dict[str, Any] | None:
    """The attributes saying why an attempt's spans are made ({}: it was sampled), or
    None: they are dropped."""
    notes = c.trace
    assert notes is not None
    if notes.sampled:
        return {}
    executed = [end - start for name, start, end, _, _ in notes.spans if name == _EXECUTE]
    why = tracer.keep.kept_for(
        state,
        c.attempt,
        c.delivery.token % 1000,  # claim.lua counts a run's deliveries in these digits
        started_ms - c.scheduled_for_ms,
        executed[0] if executed else 0,
        again=notes.again,
    )
    return None if why is None else {"shardsched.kept": why}


def _made(tracer: RunTracer, c: Claimed) -> None:
    """Make the noted spans of a delivery: its execution under its attempt with the
    delivery's own id, renewals under the execution. They carry only their own attributes
    (the delivery, an exit code): the run's are on its attempt and root, and each span and
    attribute costs the OTLP encoder microseconds."""
    notes = c.trace
    assert notes is not None
    run_id, trace = c.run_id, notes.trace
    attempt = trace_ids.attempt_span_id(run_id)
    delivery = trace_ids.delivery_span_id(run_id, c.delivery.token)
    for name, start_ms, end_ms, error, extra in notes.spans:
        if name == _EXECUTE:
            own = {"shardsched.delivery": c.delivery.token}
            if extra is not None:
                own.update(extra)
            tracer.emit(name, trace, delivery, attempt, own, start_ms, end_ms, error)
        else:  # a renewal
            tracer.emit(name, trace, None, delivery, _NONE, start_ms, end_ms, error)
