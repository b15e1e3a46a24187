"""The cold archive of runs: Apache Parquet files, by day and shard, on local disk or an
S3-compatible bucket.

Runs leave the hot tier (Redis) by being written here first and removed second. So a
crash in between leaves a run in both places, or archived twice. Readers therefore
dedupe by run id, keeping the copy archived last: an archived run is never lost and
never shown twice.

Layout (hive partitioning, so DuckDB, pandas and pyarrow read it as it is)::

    <root>/day=2026-12-01/shard=7/part-<archived ms>-<random>.parquet

``day`` is the UTC day of the run's ``scheduled_for``; ``shard`` is its shard. One file
per (day, shard) per archiving batch. The columns are :data:`SCHEMA`, version
:data:`SCHEMA_VERSION` (the ``schema_version`` column), changed only by adding columns.
A reader reads only the partitions a query names (a job's runs: its shard; a window:
those days) and filters rows in pyarrow's dataset scanner, never loading the whole
archive.

Where: ``file:///path`` (or a plain path), or ``s3://bucket/prefix``. The credentials
come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, and
``AWS_ENDPOINT_URL`` for a server other than AWS, e.g. MinIO).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from shardsched.core.models import RunState
from shardsched.core.views import Run

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
    ]
)
_PARTITIONING = ds.partitioning(
    pa.schema([("day", pa.string()), ("shard", pa.int32())]), flavor="hive"
)


class ArchivedRun(NamedTuple):
    run: Run
    output: bytes
    archived_at: datetime


def _filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    parts = urlsplit(url)
    if parts.scheme in ("", "file"):
        path = os.path.abspath(parts.path if parts.scheme else url)
        return pafs.LocalFileSystem(), path
    if parts.scheme == "s3":
        endpoint = os.environ.get("AWS_ENDPOINT_URL")
        options: dict[str, Any] = {}
        if endpoint:
            ep = urlsplit(endpoint)
            options = {"endpoint_override": ep.netloc, "scheme": ep.scheme or "https"}
        fs = pafs.S3FileSystem(region=os.environ.get("AWS_REGION", "us-east-1"), **options)
        return fs, f"{parts.netloc}{parts.path}".rstrip("/")
    raise ValueError(f"an archive is file:///path or s3://bucket/prefix, not {url!r}")


def _day(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d")


class Archive:
    """One archive location: write batches of finished runs, read runs back."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, self.root = _filesystem(url)

    def write(
        self, shard: int, runs: Sequence[tuple[Run, bytes]], archived_at: datetime
    ) -> list[str]:
        """Archive ``runs`` (with their outputs) of one shard; the files written. A file
        appears whole or not at all: local files are renamed into place, S3 objects are
        put in one request."""
        by_day: dict[str, list[tuple[Run, bytes]]] = {}
        for run, output in runs:
            by_day.setdefault(_day(run.scheduled_for), []).append((run, output))
        stamp = int(archived_at.timestamp() * 1000)
        written = []
        for day, rows in sorted(by_day.items()):
            directory = f"{self.root}/day={day}/shard={shard}"
            name = f"part-{stamp}-{secrets.token_hex(4)}.parquet"
            table = _table(rows, archived_at)
            self.fs.create_dir(directory, recursive=True)
            if isinstance(self.fs, pafs.LocalFileSystem):
                temp = f"{directory}/.{name}.tmp"
                pq.write_table(table, temp, filesystem=self.fs, compression="zstd")
                self.fs.move(temp, f"{directory}/{name}")
            else:
                pq.write_table(table, f"{directory}/{name}", filesystem=self.fs, compression="zstd")
            written.append(f"{directory}/{name}")
        return written

    def _dataset(self) -> ds.Dataset | None:
        try:
            info = self.fs.get_file_info(self.root)
        except OSError:
            return None
        if info.type == pafs.FileType.NotFound:
            return None
        return ds.dataset(
            self.root,
            filesystem=self.fs,
            format="parquet",
            partitioning=_PARTITIONING,
            exclude_invalid_files=True,
            ignore_prefixes=["."],
        )

    def read(self, shard: int, expression: Any) -> list[ArchivedRun]:
        """The runs of ``shard`` matching a pyarrow ``expression``, one per run id (the
        newest copy), sorted by scheduled_for then run id, newest first."""
        dataset = self._dataset()
        if dataset is None:
            return []
        table = dataset.to_table(
            columns=SCHEMA.names, filter=(ds.field("shard") == shard) & expression
        )
        return _dedupe(table)

    def runs_of(self, shard: int, job_id: str) -> list[ArchivedRun]:
        return self.read(shard, ds.field("job_id") == job_id)

    def run(self, shard: int, run_id: str) -> ArchivedRun | None:
        found = self.read(shard, ds.field("run_id") == run_id)
        return found[0] if found else None


def _table(rows: Iterable[tuple[Run, bytes]], archived_at: datetime) -> pa.Table:
    rows = list(rows)
    runs = [r for r, _ in rows]
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
        "output": [o for _, o in rows],
        "archived_at": [archived_at] * len(runs),
    }
    return pa.table(columns, schema=SCHEMA)


def _dedupe(table: pa.Table) -> list[ArchivedRun]:
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
            ),
            row["output"] or b"",
            row["archived_at"],
        )
        for row in newest.values()
    ]
    out.sort(key=lambda a: (a.run.scheduled_for, a.run.run_id), reverse=True)
    return out
