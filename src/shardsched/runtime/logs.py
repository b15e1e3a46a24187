"""Structured logs: one JSON object per line, per event.

Events carry their identifiers as ``extra`` fields (``run_id``, ``job_id``, ``shard``,
``epoch``, ``dag_run_id``, ``worker_id``, ``node_id``), which become keys of the line, so a
log pipeline can join a run's story across the node that fired it and the worker that ran
it. With tracing on (runtime/tracing.py), a line written under a span carries its
``trace_id`` and ``span_id``, and a line about a run (its ``run_id``) its trace's id.
``--log-format text`` gives the classic one-line text for people at a terminal.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from shardsched.runtime.trace_context import current_ids, run_trace_id

#: Fields an event may carry (logging's ``extra``), copied into the JSON line.
FIELDS = ("run_id", "job_id", "shard", "epoch", "dag_run_id", "dag_id", "worker_id", "node_id")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if (ids := current_ids()) is not None:
            line["trace_id"], line["span_id"] = ids
        elif isinstance(run_id := line.get("run_id"), str) and (trace := run_trace_id(run_id)):
            line["trace_id"] = trace  # a line about a run, outside its spans: its trace
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str = "WARNING", fmt: str = "json") -> None:
    """Root logging to stderr, as JSON lines (or text), at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.WARNING))
