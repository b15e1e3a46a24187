"""``handler:bench-record``: a benchmark's job that keeps its own record.

Each run appends ``<run id> <start ms> <execution id>`` to a file of its worker process in
the directory ``$SHARDSCHED_BENCH_RECORD``, one ``write`` on an ``O_APPEND`` descriptor,
before it returns (the execution id is the process's pid and a count: two executions of
one run are two ids, in whichever processes they ran): written by the job, not by
shardsched, so a bench can count runs lost or executed twice without trusting the ledger
it checks. Load it with ``worker --import
shardsched.bench.record_handler``."""

from __future__ import annotations

import os
import time

from shardsched.worker.handlers import HandlerContext, handler

_fd: int | None = None
_count = 0


@handler("bench-record", inline=True)
def record(ctx: HandlerContext) -> None:
    global _fd, _count
    _count += 1
    if _fd is None:
        path = os.path.join(os.environ["SHARDSCHED_BENCH_RECORD"], str(os.getpid()))
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = f"{ctx.run_id} {time.time_ns() // 1_000_000} {os.getpid()}-{_count}\n"
    os.write(_fd, line.encode())
