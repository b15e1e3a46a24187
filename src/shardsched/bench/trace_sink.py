"""``bench burst --traces off|all|RATIO [--fail-every N]``: what tracing costs a burst, its
spans really encoded and sent over OTLP/HTTP, and whether every failure's trace arrived.

The sink is an OTLP/HTTP receiver on loopback in the bench's own process (whose CPU the
burst's figures leave out): during the burst it only keeps the bodies it is sent and
answers 200; it decodes them after the processes stopped. The nodes and workers export
to it as any deployment would, through the OpenTelemetry SDK's batch processor, with
the sampler the mode names (``all``: every firing; a ratio: ``parentbased_traceidratio``)
and the default keep rule (core/trace_keep: failures kept at any ratio).

``--fail-every N`` makes every Nth job fail (the inline handler ``bench-fail``, one
attempt), so the report can say how many failed runs ended and how many failures'
traces (their attempt spans) came in: all of them, or the figure says which did not."""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from shardsched.worker.handlers import HandlerContext, handler

#: how long the sink must hear nothing before the exports are deemed over (the batch
#: processor exports every 0.5 s in a burst, OTEL_BSP_SCHEDULE_DELAY)
QUIET_S = 2.0


@handler("bench-fail", inline=True)
def fail(ctx: HandlerContext) -> None:
    """A burst's job that fails on purpose (``--fail-every``)."""
    raise RuntimeError("failing on purpose (bench burst --fail-every)")


class Sink:
    """The receiver; :meth:`environment` is what the traced processes are given."""

    def __init__(self, mode: str, schedule_delay_ms: int | None = 500) -> None:
        self.mode = mode
        #: the batch processor's export interval: short for a burst, whose CPU is counted
        #: until the exports are over; None: the SDK's (5 s), for a steady state, where
        #: an export twice a second would be the bench's own cost
        self.schedule_delay_ms = schedule_delay_ms
        self.bodies: list[bytes] = []
        self.last = time.monotonic()
        sink = self

        class Receive(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                sink.bodies.append(body)
                sink.last = time.monotonic()
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receive)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def environment(self) -> dict[str, str]:
        """The OTEL_* variables of the mode (``off``: none: tracing off)."""
        if self.mode == "off":
            return {}
        port = self.server.server_address[1]
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{port}/v1/traces"}
        if self.schedule_delay_ms is not None:
            env["OTEL_BSP_SCHEDULE_DELAY"] = str(self.schedule_delay_ms)
        if self.mode == "all":
            env["OTEL_TRACES_SAMPLER"] = "always_on"
        else:
            env["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
            env["OTEL_TRACES_SAMPLER_ARG"] = self.mode
        return env

    def settle(self, timeout_s: float = 60.0) -> None:
        """Until nothing came for QUIET_S (the processes' queued spans are exported);
        waited in every mode, ``off`` too, so each mode's CPU covers the same span."""
        deadline = time.monotonic() + timeout_s
        start = time.monotonic()
        while time.monotonic() < deadline:
            if time.monotonic() - max(self.last, start) >= QUIET_S:
                return
            time.sleep(0.1)  # polling a counter another thread moves; no event to wait on

    def report(self, failed_runs: set[str]) -> dict[str, Any]:
        """What came in: spans by name, traces, and which failed runs have an attempt span
        (``failed_runs``: the run ids the ledger says failed)."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.server.shutdown()
        self.server.server_close()
        names: Counter[str] = Counter()
        traces: set[bytes] = set()
        attempts: set[str] = set()
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        names[span.name] += 1
                        traces.add(span.trace_id)
                        if span.name == "shardsched.attempt":
                            for a in span.attributes:
                                if a.key == "shardsched.run_id":
                                    attempts.add(a.value.string_value)
        return {
            "mode": self.mode,
            "requests": len(self.bodies),
            "bytes": sum(len(b) for b in self.bodies),
            "spans": sum(names.values()),
            "spans_by_name": dict(sorted(names.items())),
            "traces": len(traces),
            "failed_runs": len(failed_runs),
            "failed_runs_traced": len(failed_runs & attempts),
        }


@contextmanager
def exporting_to(sink: Sink | None) -> Iterator[None]:
    """The sink's variables in this process's environment while the bench runs (the
    processes it starts inherit them), as they were afterwards."""
    before = {name: os.environ.get(name) for name in (sink.environment() if sink else {})}
    os.environ.update(sink.environment() if sink else {})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
