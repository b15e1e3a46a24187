"""OpenTelemetry traces of firings: off unless the standard ``OTEL_*`` variables ask for
them, and then exported over OTLP/HTTP (or to the console).

Tracing is on when ``OTEL_TRACES_EXPORTER`` is ``otlp`` or ``console``, or an OTLP
endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``),
and ``OTEL_SDK_DISABLED`` is not ``true``. Off, nothing of OpenTelemetry is imported and
the hot paths pay one ``is None`` test. The SDK reads the rest of its settings itself
(``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_RESOURCE_ATTRIBUTES``…).

Span ids come from core/trace_ids: every process names the spans of a firing alike, so
the worker's spans join the node's trace with nothing passed between them but the run id.
A span given its ids by :func:`_FixedIds` takes them once; any other span gets random ids.
"""

from __future__ import annotations

import contextvars
import os
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from shardsched.core import trace_ids
from shardsched.core.ids import dag_run_of

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

#: (trace id, span id) the next span started in this context takes (_FixedIds)
_next_ids: contextvars.ContextVar[tuple[int | None, int] | None] = contextvars.ContextVar(
    "shardsched_next_span_ids", default=None
)
_active = False  #: a RunTracer exists in this process (logs look for the current span)
_SAMPLED: Any = None  #: TraceFlags.SAMPLED, once OpenTelemetry is imported


def enabled_by(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces (see the module's docstring)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    return exporter in ("otlp", "console") or bool(endpoint)


def _fixed_ids() -> Any:
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class FixedIds(IdGenerator):
        """Random ids, unless the span being started was given its own."""

        def generate_trace_id(self) -> int:
            given = _next_ids.get()
            if given is not None and given[0] is not None:
                _next_ids.set((None, given[1]))
                return given[0]
            return random.getrandbits(128) or 1

        def generate_span_id(self) -> int:
            given = _next_ids.get()
            if given is not None:
                _next_ids.set(None)
                return given[1]
            return random.getrandbits(64) or 1

    return FixedIds()


class RunTracer:
    """The spans of a process: a run's delivery, its attempt, its firing."""

    def __init__(self, provider: TracerProvider, service: str) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import TraceFlags

        global _active, _SAMPLED
        _active, _SAMPLED = True, TraceFlags(TraceFlags.SAMPLED)
        self.provider = provider
        self.tracer = trace.get_tracer("shardsched", tracer_provider=provider)
        self._decided: dict[str, bool] = {}  #: run id -> sampled (samples())
        self.service = service

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> RunTracer | None:
        """A tracer exporting as the environment says; None when tracing is off."""
        env = os.environ if env is None else env
        if not enabled_by(env):
            return None
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )

        resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or service})
        provider = TracerProvider(resource=resource, id_generator=_fixed_ids())
        exporter: SpanExporter
        if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter))
        return cls(provider, service)

    @classmethod
    def for_tests(
        cls, exporter: Any, service: str = "shardsched-test", sampler: Any = None
    ) -> RunTracer:
        """A tracer handing each span to ``exporter`` as it ends (an in-memory one)."""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = TracerProvider(id_generator=_fixed_ids(), sampler=sampler)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return cls(provider, service)

    def shutdown(self) -> None:
        """Export what is left (the batch processor's queue)."""
        self.provider.shutdown()

    def samples(self, run_id: str) -> bool:
        """Whether the firing of ``run_id`` is traced (the sampler decides by its trace
        id, alike in every process): an unsampled firing costs no span at all. Asked at
        a run's claim, start and completion: decided once (a bounded memo)."""
        decided = self._decided.get(run_id)
        if decided is None:
            if len(self._decided) >= 100_000:
                self._decided.clear()
            decided = self._decided[run_id] = self._sampled(trace_ids.trace_id(run_id))
        return decided

    def samples_firing(self, firing: str) -> bool:
        """:meth:`samples` for a firing named as trace_ids.firing_of names it."""
        return self._sampled(trace_ids.firing_trace_id(firing))

    def _sampled(self, trace: int) -> bool:
        result = self.provider.sampler.should_sample(None, trace, "shardsched.firing")
        return bool(result.decision.is_sampled())

    def _under(self, trace: int, span: int) -> Any:
        """A context whose current span is the remote span ``span`` of trace ``trace``."""
        from opentelemetry import trace as api
        from opentelemetry.trace import NonRecordingSpan, SpanContext

        # only sampled firings get spans (callers ask :meth:`samples` first)
        parent = SpanContext(trace, span, is_remote=True, trace_flags=_SAMPLED)
        return api.set_span_in_context(NonRecordingSpan(parent))

    def start_delivery(
        self, run_id: str, token: int, attributes: dict[str, Any], start_ms: int
    ) -> Span:
        """The execution span of one delivery of a run: under its attempt's span."""
        trace = trace_ids.trace_id(run_id)
        ctx = self._under(trace, trace_ids.attempt_span_id(run_id))
        _next_ids.set((None, trace_ids.delivery_span_id(run_id, token)))
        try:
            return self.tracer.start_span(
                "shardsched.execute",
                context=ctx,
                attributes=attributes,
                start_time=start_ms * 1_000_000,
            )
        finally:
            _next_ids.set(None)

    def attempt_ended(
        self,
        run_id: str,
        attributes: dict[str, Any],
        start_ms: int,
        end_ms: int,
        error: str | None,
    ) -> None:
        """The span of an attempt, emitted once, by the worker whose completion Redis
        applied: under the firing (a DAG task's: under its task), linked to the attempt
        before it."""
        from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

        trace = trace_ids.trace_id(run_id)
        links = []
        if (before := trace_ids.previous_attempt(run_id)) is not None:
            flags = TraceFlags(TraceFlags.SAMPLED if self._sampled(trace) else 0)
            earlier = SpanContext(trace, trace_ids.attempt_span_id(before), True, flags)
            links.append(Link(earlier, {"shardsched.link": "previous attempt"}))
        _next_ids.set((None, trace_ids.attempt_span_id(run_id)))
        try:
            span = self.tracer.start_span(
                "shardsched.attempt",
                context=self._under(trace, trace_ids.attempt_parent_id(run_id)),
                attributes=attributes,
                links=links,
                start_time=start_ms * 1_000_000,
            )
        finally:
            _next_ids.set(None)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=end_ms * 1_000_000)

    def firing_ended(
        self, run_id: str, attributes: dict[str, Any], start_ms: int, end_ms: int, state: str
    ) -> None:
        """A run ended for good (succeeded, failed, dead-lettered, cancelled): the root span
        of its firing, from its scheduled time to that end; a DAG task's run ends its
        task's span instead (the DAG run's root ends with the DAG run, :meth:`root`)."""
        attributes = {**attributes, "shardsched.state": state}
        if dag_run_of(run_id):
            trace = trace_ids.trace_id(run_id)
            self._emit(
                "shardsched.task",
                trace,
                trace_ids.task_span_id(run_id),
                self._under(trace, trace_ids.firing_span_id(run_id)),
                attributes,
                start_ms,
                end_ms,
                None if state == "succeeded" else state,
            )
        else:
            self.root(trace_ids.firing_of(run_id), attributes, start_ms, end_ms, state)

    def root(
        self, firing: str, attributes: dict[str, Any], start_ms: int, end_ms: int, state: str
    ) -> None:
        """The root span of a firing (``<job>:<tick>``, or a DAG run's id) that ended."""
        from opentelemetry.context import Context

        self._emit(
            "shardsched.firing",
            trace_ids.firing_trace_id(firing),
            trace_ids.firing_root_id(firing),
            Context(),
            {**attributes, "shardsched.state": state},
            start_ms,
            end_ms,
            None if state == "succeeded" else state,
        )

    def fired(self, firing: str, attributes: dict[str, Any], start_ms: int, end_ms: int) -> None:
        """The owner's ledger write of a tick (fire.lua), under the firing's root."""
        trace = trace_ids.firing_trace_id(firing)
        ctx = self._under(trace, trace_ids.firing_root_id(firing))
        self._emit("shardsched.fire", trace, None, ctx, attributes, start_ms, end_ms, None)

    def child(
        self,
        name: str,
        run_id: str,
        parent: int,
        attributes: dict[str, Any],
        start_ms: int,
        end_ms: int,
        error: str | None = None,
    ) -> None:
        """A span of a run's trace under the span ``parent`` (a claim under its attempt, a
        renewal under its delivery), with an id of its own."""
        trace = trace_ids.trace_id(run_id)
        ctx = self._under(trace, parent)
        self._emit(name, trace, None, ctx, attributes, start_ms, end_ms, error)

    def _emit(
        self,
        name: str,
        trace: int,
        span_id: int | None,
        ctx: Any,
        attributes: dict[str, Any],
        start_ms: int,
        end_ms: int,
        error: str | None,
    ) -> None:
        """Start and end one span at once: ``span_id`` given, the span takes it (and, with
        an empty ``ctx``, the trace id ``trace`` too)."""
        from opentelemetry.trace import Status, StatusCode

        if span_id is not None:
            _next_ids.set((trace, span_id))
        try:
            span = self.tracer.start_span(
                name, context=ctx, attributes=attributes, start_time=start_ms * 1_000_000
            )
        finally:
            _next_ids.set(None)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=max(end_ms, start_ms) * 1_000_000)


def tracer_from_env(service: str) -> RunTracer | None:
    """Tracing as the OTEL_* variables ask (off by default), or a clear exit when they
    ask for it and OpenTelemetry is not installed."""
    try:
        return RunTracer.from_env(service)
    except ImportError as exc:
        raise SystemExit(
            f"shardsched: OTEL_* asks for traces but {exc.name} is missing:"
            " pip install 'shardsched[tracing]'"
        ) from None


@contextmanager
def current(span: Span | None) -> Iterator[None]:
    """Make ``span`` the current span in this task (handlers and logs see it)."""
    if span is None:
        yield
        return
    from opentelemetry import context, trace

    token = context.attach(trace.set_span_in_context(span))
    try:
        yield
    finally:
        context.detach(token)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the current span, for a log line; None when tracing
    is off or no span is current."""
    if not _active:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span (a job's ``TRACEPARENT``)."""
    if not _active:
        return None
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return trace_ids.traceparent(ctx.trace_id, ctx.span_id, ctx.trace_flags.sampled)
