"""The cold archive's format (store/archive.py writes and reads the files): the columns
of the ``runs`` and ``records`` tables, version :data:`SCHEMA_VERSION`, changed only by
adding columns, and the one conversion each way between a run as the API shows it and
its row. A run archived twice (a crash between writing and removing it) reads back once,
the copy archived last."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa

from shardsched.core import trace_ids
from shardsched.core.models import RunState
from shardsched.core.views import Run
from shardsched.store.archive_rows import ArchivedRecord, ArchivedRun, ToArchive

SCHEMA_VERSION = 1
_TS = pa.timestamp("ms", tz="UTC")
#: One row per archived run: the run's fields as the API shows them, its output, and when
#: it was archived (the newest copy of a run id wins on read).
SCHEMA = pa.schema(
    [
        ("schema_version", pa.int16()),
        ("run_id", pa.string()),
        ("job_id", pa.string()),
        ("dag_run_id", pa.string()),
        ("attempt", pa.int32()),
        ("state", pa.string()),
        ("scheduled_for", _TS),
        ("created_at", _TS),
        ("started_at", _TS),
        ("finished_at", _TS),
        ("claimed_by", pa.string()),
        ("exit_code", pa.int32()),
        ("reason", pa.string()),
        ("job_version", pa.int64()),
        ("output", pa.binary()),
        ("archived_at", _TS),
        ("backfill", pa.bool_()),  #: fired by a backfill (the audit's late-but-owed ticks)
        ("next_run_id", pa.string()),  #: the attempt that followed it, if any
        #: when its tick was planned to run (a spread job's; null: its tick itself, or a
        #: file written before the column was added)
        ("planned_for", _TS),
        #: which deadline it missed (start, finish; null: none, or an older file)
        ("deadline_missed", pa.string()),
    ]
)
#: Skip records and DAG runs that left Redis: the record's own fields, as JSON.
RECORDS_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int16()),
        ("kind", pa.string()),  #: "skip" | "dag_run"
        ("owner_id", pa.string()),  #: the job (skip) or DAG (DAG run) it belongs to
        ("record_id", pa.string()),  #: the skip record itself, or the DAG run id
        ("at", _TS),  #: its first skipped tick, or the DAG run's scheduled_for
        ("fields", pa.string()),  #: a JSON object: the record's fields
        ("archived_at", _TS),
    ]
)


def runs_table(rows: Iterable[ToArchive], archived_at: datetime) -> pa.Table:
    rows = list(rows)
    runs = [item.run for item in rows]
    columns: dict[str, list[Any]] = {
        "schema_version": [SCHEMA_VERSION] * len(runs),
        "run_id": [r.run_id for r in runs],
        "job_id": [r.job_id for r in runs],
        "dag_run_id": [r.dag_run_id for r in runs],
        "attempt": [r.attempt for r in runs],
        "state": [r.state.value for r in runs],
        "scheduled_for": [r.scheduled_for for r in runs],
        "created_at": [r.created_at for r in runs],
        "started_at": [r.started_at for r in runs],
        "finished_at": [r.finished_at for r in runs],
        "claimed_by": [r.claimed_by for r in runs],
        "exit_code": [r.exit_code for r in runs],
        "reason": [r.reason for r in runs],
        "job_version": [r.job_version for r in runs],
        "output": [item.output for item in rows],
        "archived_at": [archived_at] * len(runs),
        "backfill": [item.backfill for item in rows],
        "next_run_id": [item.next_run_id for item in rows],
        "planned_for": [r.planned_for for r in runs],
        "deadline_missed": [r.deadline_missed for r in runs],
    }
    return pa.table(columns, schema=SCHEMA)


def records_table(rows: Sequence[ArchivedRecord], archived_at: datetime) -> pa.Table:
    columns: dict[str, list[Any]] = {
        "schema_version": [SCHEMA_VERSION] * len(rows),
        "kind": [r.kind for r in rows],
        "owner_id": [r.owner_id for r in rows],
        "record_id": [r.record_id for r in rows],
        "at": [r.at for r in rows],
        "fields": [json.dumps(r.fields, separators=(",", ":")) for r in rows],
        "archived_at": [archived_at] * len(rows),
    }
    return pa.table(columns, schema=RECORDS_SCHEMA)


def newest_runs(table: pa.Table) -> list[ArchivedRun]:
    newest: dict[str, dict[str, Any]] = {}
    for row in table.sort_by([("archived_at", "ascending")]).to_pylist():
        newest[row["run_id"]] = row  # later copies win
    out = [
        ArchivedRun(
            Run(
                run_id=row["run_id"],
                job_id=row["job_id"],
                dag_run_id=row["dag_run_id"],
                scheduled_for=row["scheduled_for"],
                state=RunState(row["state"]),
                attempt=row["attempt"],
                claimed_by=row["claimed_by"],
                lease_expires_at=None,
                created_at=row["created_at"],
                started_at=row["started_at"],
                finished_at=row["finished_at"],
                exit_code=row["exit_code"],
                reason=row["reason"],
                job_version=row["job_version"],
                archived=True,
                next_run_id=row["next_run_id"],
                planned_for=row.get("planned_for"),
                deadline_missed=row.get("deadline_missed"),
                trace_id=f"{trace_ids.trace_id(row['run_id']):032x}",
            ),
            row["output"] or b"",
            row["archived_at"],
            bool(row["backfill"]),
            row["next_run_id"],
        )
        for row in newest.values()
    ]
    out.sort(key=lambda a: (a.run.scheduled_for, a.run.run_id), reverse=True)
    return out
