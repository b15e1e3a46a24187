"""OpenTelemetry traces of firings: off unless the standard ``OTEL_*`` variables ask for
them, and then exported over OTLP/HTTP (or to the console).

Tracing is on when ``OTEL_TRACES_EXPORTER`` is ``otlp`` or ``console``, or an OTLP
endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``),
and ``OTEL_SDK_DISABLED`` is not ``true``. Off, nothing of OpenTelemetry is imported and
the hot paths pay one ``is None`` test. The SDK reads the rest of its settings itself
(``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_RESOURCE_ATTRIBUTES``…).

Span ids come from core/trace_ids: every process names the spans of a firing alike, so
the worker's spans join the node's trace with nothing passed between them but the run id.

A firing is traced when the sampler says so at its start (``OTEL_TRACES_SAMPLER``), or
when its end says so: a worker notes every run's spans as plain numbers and makes them
only when the run was sampled or ended failed, retried, redelivered, late or slow
(core/trace_keep, ``SHARDSCHED_TRACES_*``), so every failure has its trace at any
sampling rate.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from shardsched.core import trace_ids
from shardsched.core.ids import dag_run_of
from shardsched.core.trace_keep import KeepRule
from shardsched.runtime import trace_context

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

#: spans the batch processor holds before it drops (OTEL_BSP_MAX_QUEUE_SIZE overrides):
#: 25,000 failures at once make 125,000 spans
QUEUE_SIZE = 131_072

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


def _otel() -> None:
    """Import what making a span needs, once (a span is made per call on the hot path)."""
    global _SAMPLED, _ReadableSpan, _SpanContext, _Status, _StatusCode, _Link
    global _UNSET, _NonRecordingSpan, _in_context
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import (
        Link,
        NonRecordingSpan,
        SpanContext,
        Status,
        StatusCode,
        TraceFlags,
        set_span_in_context,
    )

    _SAMPLED = TraceFlags(TraceFlags.SAMPLED)
    _ReadableSpan, _SpanContext, _NonRecordingSpan = ReadableSpan, SpanContext, NonRecordingSpan
    _Status, _StatusCode, _Link, _UNSET = Status, StatusCode, Link, Status(StatusCode.UNSET)
    _in_context = set_span_in_context


_ReadableSpan: Any = None
_SpanContext: Any = None
_NonRecordingSpan: Any = None
_in_context: Any = None
_Status: Any = None
_StatusCode: Any = None
_Link: Any = None
_UNSET: Any = None


_TRACE_ID_LIMIT = (1 << 64) - 1  #: TraceIdRatioBased's: the trace id's low 64 bits


def _ratio_bound(sampler: Any) -> int | None:
    """The bound of a trace-id ratio sampler, alone or as a ParentBased sampler's root
    (a firing has no parent: the root decides), so a run's sampling is one comparison,
    not the SDK's 1.3 µs of context lookups; None for any other sampler (asked as is)."""
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    if isinstance(sampler, ParentBased):
        sampler = getattr(sampler, "_root", None)  # not public: the SDK's path if gone
    if isinstance(sampler, TraceIdRatioBased) and sampler.TRACE_ID_LIMIT == _TRACE_ID_LIMIT:
        return int(sampler.bound)
    return None


def _resource(attributes: dict[str, Any]) -> Any:
    """The process's Resource, hashed once: OTLP's encoder hashes a span's resource for
    every span it encodes, and the SDK's hash is a JSON dump of its attributes (7 µs)."""
    from opentelemetry.sdk.resources import Resource

    class OnceHashed(Resource):
        def __init__(self, base: Resource) -> None:
            super().__init__(dict(base.attributes), base.schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return OnceHashed(Resource.create(attributes))


class RunTracer:
    """The spans of a process: a run's delivery, its attempt, its firing.

    Every span here is made after the fact, once its ids, times and outcome are known (a
    run's spans are noted while it runs and made at its end, when it is kept): it is built
    as the SDK's ``ReadableSpan``, what a span processor hands its exporter, and given to
    the processor (batching, OTLP) directly. A live SDK span would pay its lock, limits,
    sampler and context for nothing: 20 µs a span against 1.8 (bench/RESULTS.md)."""

    def __init__(
        self,
        provider: TracerProvider,
        service: str,
        processor: SpanProcessor,
        keep: KeepRule | None = None,
        resource: Any = None,
    ) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        _otel()
        trace_context.active = True
        self.provider = provider
        self.processor = processor
        self.keep = KeepRule() if keep is None else keep
        self.resource = resource if resource is not None else provider.resource
        self.scope = InstrumentationScope("shardsched")
        self._decided: dict[str, bool] = {}  #: run id -> sampled (samples())
        self._bound = _ratio_bound(provider.sampler)
        self.service = service

    @classmethod
    def from_env(cls, service: str, env: Mapping[str, str] | None = None) -> RunTracer | None:
        """A tracer exporting as the environment says; None when tracing is off."""
        env = os.environ if env is None else env
        keep = KeepRule.from_env(env)  # a bad value stops the process, traced or not
        if not enabled_by(env):
            return None
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )

        resource = _resource({"service.name": env.get("OTEL_SERVICE_NAME") or service})
        provider = TracerProvider(resource=resource)
        exporter: SpanExporter
        if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        # a queue the size of a burst's kept spans: the SDK's 2,048 dropped most of them
        # (25,000 firings traced end at once: 63,076 of ~150,000 spans came through)
        queue = int(env.get("OTEL_BSP_MAX_QUEUE_SIZE") or QUEUE_SIZE)
        processor = BatchSpanProcessor(exporter, max_queue_size=queue)
        provider.add_span_processor(processor)  # shut down (flushed) with the provider
        return cls(provider, service, processor, keep, resource)

    @classmethod
    def for_tests(
        cls,
        exporter: Any,
        service: str = "shardsched-test",
        sampler: Any = None,
        keep: KeepRule | None = None,
    ) -> RunTracer:
        """A tracer handing each span to ``exporter`` as it ends (an in-memory one)."""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = TracerProvider(sampler=sampler)
        processor = SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
        return cls(provider, service, processor, keep)

    def shutdown(self) -> None:
        """Export what is left (the batch processor's queue)."""
        self.provider.shutdown()

    def samples(self, run_id: str) -> bool:
        """Whether the firing of ``run_id`` is traced from its start (the sampler decides
        by its trace id, alike in every process); an unsampled run's spans are still
        noted, and made only if its end keeps them (:attr:`keep`). Asked at a run's
        claim, start and completion: decided once (a bounded memo)."""
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
        if self._bound is not None:
            return trace & _TRACE_ID_LIMIT < self._bound
        result = self.provider.sampler.should_sample(None, trace, "shardsched.firing")
        return bool(result.decision.is_sampled())

    def sampled(self, trace: int) -> bool:
        """:meth:`samples` for a trace id, not remembered."""
        return self._sampled(trace)

    def execution(self, run_id: str, token: int) -> Any:
        """The context a delivery of a sampled run executes in (:func:`current`): its
        execution span current, so a handler's own spans nest under it. An unsampled
        run's is ``(run id, token)`` alone: its logs and a command's TRACEPARENT
        (flagged not sampled: a job's own tracer records nothing) make its ids when
        they ask, and a run that asks nothing pays nothing (3.4 + 1.5 µs a run saved)."""
        trace, span = trace_ids.trace_id(run_id), trace_ids.delivery_span_id(run_id, token)
        return _in_context(_NonRecordingSpan(_SpanContext(trace, span, False, _SAMPLED)))

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
        trace = trace_ids.trace_id(run_id)
        links: tuple[Any, ...] = ()
        if (before := trace_ids.previous_attempt(run_id)) is not None:
            earlier = _SpanContext(trace, trace_ids.attempt_span_id(before), True, _SAMPLED)
            links = (_Link(earlier, {"shardsched.link": "previous attempt"}),)
        self.emit(
            "shardsched.attempt",
            trace,
            trace_ids.attempt_span_id(run_id),
            trace_ids.attempt_parent_id(run_id),
            attributes,
            start_ms,
            end_ms,
            error,
            links,
        )

    def firing_ended(
        self, run_id: str, attributes: dict[str, Any], start_ms: int, end_ms: int, state: str
    ) -> None:
        """A run ended for good (succeeded, failed, dead-lettered, cancelled): the root span
        of its firing, from its scheduled time to that end; a DAG task's run ends its
        task's span instead (the DAG run's root ends with the DAG run, :meth:`root`)."""
        attributes = {**attributes, "shardsched.state": state}
        if dag_run_of(run_id):
            self.emit(
                "shardsched.task",
                trace_ids.trace_id(run_id),
                trace_ids.task_span_id(run_id),
                trace_ids.firing_span_id(run_id),
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
        self.emit(
            "shardsched.firing",
            trace_ids.firing_trace_id(firing),
            trace_ids.firing_root_id(firing),
            None,
            {**attributes, "shardsched.state": state},
            start_ms,
            end_ms,
            None if state == "succeeded" else state,
        )

    def fired(self, firing: str, attributes: dict[str, Any], start_ms: int, end_ms: int) -> None:
        """The owner's ledger write of a tick (fire.lua), under the firing's root."""
        trace = trace_ids.firing_trace_id(firing)
        parent = trace_ids.firing_root_id(firing)
        self.emit("shardsched.fire", trace, None, parent, attributes, start_ms, end_ms, None)

    def emit(
        self,
        name: str,
        trace: int,
        span_id: int | None,
        parent: int | None,
        attributes: dict[str, Any],
        start_ms: int,
        end_ms: int,
        error: str | None,
        links: tuple[Any, ...] = (),
    ) -> None:
        """One ended span of trace ``trace`` under the span ``parent`` (None: a root), with
        the id ``span_id`` (None: a random one), to the processor."""
        context = _SpanContext(trace, span_id or random.getrandbits(64) or 1, False, _SAMPLED)
        span = _ReadableSpan(
            name,
            context,
            None if parent is None else _SpanContext(trace, parent, True, _SAMPLED),
            self.resource,
            attributes,
            (),
            links,
            instrumentation_scope=self.scope,
            status=_UNSET if error is None else _Status(_StatusCode.ERROR, error),
            start_time=start_ms * 1_000_000,
            end_time=max(end_ms, start_ms) * 1_000_000,
        )
        self.processor.on_end(span)


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
    except ValueError as exc:  # a SHARDSCHED_TRACES_* variable (core/trace_keep)
        raise SystemExit(f"shardsched: {exc}") from None
