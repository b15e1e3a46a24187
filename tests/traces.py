"""Helpers of the tracing tests: a run's spans, found as a trace viewer finds them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from shardsched.core import trace_ids


def run_spans(spans: Iterable[Any], run_id: str) -> list[Any]:
    """The spans of one run (an attempt) among finished SDK spans: those that say its id
    (its attempt, its firing's root or task span) and those under its attempt, found by
    their parents (claim, execution, renewals, completion carry only their own
    attributes)."""
    trace = trace_ids.trace_id(run_id)
    mine = [s for s in spans if s.context.trace_id == trace]
    family = {trace_ids.attempt_span_id(run_id)}
    grew = True
    while grew:  # the execution is under the attempt, its renewals under the execution
        grew = False
        for s in mine:
            under = s.parent is not None and s.parent.span_id in family
            if under and s.context.span_id not in family:
                family.add(s.context.span_id)
                grew = True
    return [
        s
        for s in mine
        if s.context.span_id in family or (s.attributes or {}).get("shardsched.run_id") == run_id
    ]


class OtlpReceiver:
    """An OTLP/HTTP traces receiver on a loopback port, in a thread: decodes each
    protobuf export request it is sent into plain dicts (path, service, name, trace id,
    parent, run id)."""

    def __init__(self) -> None:
        import http.server
        import threading

        got: list[dict[str, Any]] = []
        self.got = got

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                )

                request = ExportTraceServiceRequest()
                request.ParseFromString(self.rfile.read(int(self.headers["content-length"])))
                for resource_spans in request.resource_spans:
                    resource = resource_spans.resource.attributes
                    service = {a.key: a.value.string_value for a in resource}.get("service.name")
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            attrs = {a.key: a.value.string_value for a in span.attributes}
                            got.append({"path": self.path, "service": service,
                                "name": span.name, "trace_id": int.from_bytes(span.trace_id),
                                "parent": span.parent_span_id.hex(),
                                "run_id": attrs.get("shardsched.run_id", "")})  # fmt: skip
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
