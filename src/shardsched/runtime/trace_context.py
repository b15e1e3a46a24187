"""The trace context a run executes in, for its handler, its log lines and a command's
``TRACEPARENT`` (runtime/tracing.py makes the spans): a sampled run's is OpenTelemetry's
own context, its execution span current; an unsampled run's is only its (run id,
delivery token) in a context variable, its ids derived when a log line asks."""

from __future__ import annotations

import contextvars
from typing import Any

from shardsched.core import trace_ids

#: (run id, delivery token) of the unsampled run executing in this context
_unsampled_run: contextvars.ContextVar[tuple[str, int] | None] = contextvars.ContextVar(
    "shardsched_unsampled_run", default=None
)
active = False  #: a RunTracer exists in this process (logs look for the current span)


class current:
    """Make ``context`` (RunTracer.execution) current in this task: handlers and logs see
    its span (an unsampled run's: its ids only). A class, not a generator: a worker
    enters one for every run it executes, and ``@contextmanager`` costs ~4 µs more."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: Any) -> None:
        self._context = context
        self._token: Any = None

    def __enter__(self) -> None:
        context = self._context
        if context is None:
            return
        if isinstance(context, tuple):
            self._token = _unsampled_run.set(context)
            return
        from opentelemetry import context as api

        self._token = api.attach(context)

    def __exit__(self, *exc: object) -> None:
        context = self._context
        if context is None:
            return
        if isinstance(context, tuple):
            _unsampled_run.reset(self._token)
            return
        from opentelemetry import context as api

        api.detach(self._token)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the current span, for a log line; None when tracing
    is off or no span is current."""
    if not active:
        return None
    if (run := _unsampled_run.get()) is not None:
        trace_id, span_id = _ids_of(run)
        return f"{trace_id:032x}", f"{span_id:016x}"
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def run_trace_id(run_id: str) -> str | None:
    """The trace id in hex of a run's firing, for a log line about it written outside its
    spans; None when tracing is off or it is no run id."""
    if not active:
        return None
    try:
        return f"{trace_ids.trace_id(run_id):032x}"
    except ValueError:
        return None


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span (a job's ``TRACEPARENT``)."""
    if not active:
        return None
    if (run := _unsampled_run.get()) is not None:
        return trace_ids.traceparent(*_ids_of(run), False)
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return trace_ids.traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled)


def _ids_of(run: tuple[str, int]) -> tuple[int, int]:
    """(trace id, execution span id) of a delivery (run id, token)."""
    return trace_ids.trace_id(run[0]), trace_ids.delivery_span_id(run[0], run[1])
