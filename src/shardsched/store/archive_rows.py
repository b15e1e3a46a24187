"""The archive's rows as the rest of the code holds them: a run, a skip record or a DAG
run, and a run on its way out of Redis. Apart from store/archive_format.py, which turns
them into columns, so a reader of history types them without importing pyarrow (180 ms
at import, paid only where an archive is opened)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from shardsched.core.views import Run


class ArchivedRun(NamedTuple):
    run: Run
    output: bytes
    archived_at: datetime
    backfill: bool = False
    next_run_id: str | None = None

    @property
    def key(self) -> tuple[float, bytes]:
        """Its place in a job's runs index (score, member), as hot runs are paged."""
        return float(round(self.run.scheduled_for.timestamp() * 1000)), self.run.run_id.encode()


class ArchivedRecord(NamedTuple):
    """A skip record or a DAG run in the archive (see :data:`RECORDS_SCHEMA`)."""

    kind: str
    owner_id: str
    record_id: str
    at: datetime
    fields: dict[str, str]


class ToArchive(NamedTuple):
    """A finished run on its way out of Redis: the record, its output and the two facts
    the API does not show but the audit needs."""

    run: Run
    output: bytes
    backfill: bool = False
    next_run_id: str | None = None
