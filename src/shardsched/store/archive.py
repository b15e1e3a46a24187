"""The cold archive of runs: Apache Parquet files, by day and shard, on local disk or an
S3-compatible bucket.

Runs leave the hot tier (Redis) by being written here first and removed second. So a
crash in between leaves a run in both places, or archived twice. Readers therefore
dedupe by run id, keeping the copy archived last: an archived run is never lost and
never shown twice.

Layout (hive partitioning, so DuckDB, pandas and pyarrow read it as it is)::

    <root>/runs/day=2026-12-01/shard=7/part-<archived ms>-<random>.parquet
    <root>/records/day=2026-12-01/shard=7/part-<archived ms>-<random>.parquet

``day`` is the UTC day of the run's ``scheduled_for``; ``shard`` is its shard. One file
per (day, shard) per archiving batch. The columns of ``runs`` are :data:`SCHEMA`, version
:data:`SCHEMA_VERSION` (the ``schema_version`` column), changed only by adding columns.
``records`` holds the other history that leaves Redis: skip records (``kind`` "skip") and
DAG runs ("dag_run"), each as its JSON fields (:data:`RECORDS_SCHEMA`).
A reader reads only the partitions a query names (a job's runs: its shard; a window:
those days) and filters rows in pyarrow's dataset scanner, never loading the whole
archive.

Where: ``file:///path`` (or a plain path), or ``s3://bucket/prefix``. The credentials
come from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, and
``AWS_ENDPOINT_URL`` for a server other than AWS, e.g. MinIO).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from shardsched.core.views import Run
from shardsched.store.archive_format import (
    RECORDS_SCHEMA,
    SCHEMA,
    newest_runs,
    records_table,
    runs_table,
)
from shardsched.store.archive_rows import ArchivedRecord, ArchivedRun, ToArchive

_PARTITION_SCHEMA = pa.schema([("day", pa.string()), ("shard", pa.int32())])
_PARTITIONING = ds.partitioning(_PARTITION_SCHEMA, flavor="hive")
#: What a reader sees: a column missing from an older file reads as null.
_DATASET_SCHEMA = pa.unify_schemas([SCHEMA, _PARTITION_SCHEMA])
_RECORDS_DATASET_SCHEMA = pa.unify_schemas([RECORDS_SCHEMA, _PARTITION_SCHEMA])


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


def _window(lo_ms: float | None, hi_ms: float | None, column: str = "scheduled_for") -> Any:
    """Rows with ``column`` in [lo, hi] (ms), with the day partitions outside it pruned."""
    expression = ds.scalar(True)
    if lo_ms is not None and lo_ms != float("-inf"):
        lo = datetime.fromtimestamp(lo_ms / 1000, UTC)
        expression &= (ds.field("day") >= _day(lo)) & (ds.field(column) >= lo)
    if hi_ms is not None and hi_ms != float("inf"):
        hi = datetime.fromtimestamp(hi_ms / 1000, UTC)
        expression &= (ds.field("day") <= _day(hi)) & (ds.field(column) <= hi)
    return expression


class Archive:
    """One archive location: write batches of finished runs, read runs back."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs, self.root = _filesystem(url)

    def write(
        self, shard: int, runs: Sequence[ToArchive | tuple[Run, bytes]], archived_at: datetime
    ) -> list[str]:
        """Archive ``runs`` (with their outputs) of one shard; the files written. A file
        appears whole or not at all: local files are renamed into place, S3 objects are
        put in one request."""
        by_day: dict[str, list[ToArchive]] = {}
        for row in runs:
            item = row if isinstance(row, ToArchive) else ToArchive(*row)
            by_day.setdefault(_day(item.run.scheduled_for), []).append(item)
        tables = {day: runs_table(rows, archived_at) for day, rows in by_day.items()}
        return self._put("runs", shard, tables, archived_at)

    def write_records(
        self, shard: int, records: Sequence[ArchivedRecord], archived_at: datetime
    ) -> list[str]:
        """Archive skip records or DAG runs of one shard; the files written."""
        by_day: dict[str, list[ArchivedRecord]] = {}
        for record in records:
            by_day.setdefault(_day(record.at), []).append(record)
        tables = {day: records_table(rows, archived_at) for day, rows in by_day.items()}
        return self._put("records", shard, tables, archived_at)

    def _put(
        self, kind: str, shard: int, tables: dict[str, pa.Table], archived_at: datetime
    ) -> list[str]:
        stamp = int(archived_at.timestamp() * 1000)
        written = []
        for day, table in sorted(tables.items()):
            directory = f"{self.root}/{kind}/day={day}/shard={shard}"
            name = f"part-{stamp}-{secrets.token_hex(4)}.parquet"
            self.fs.create_dir(directory, recursive=True)
            if isinstance(self.fs, pafs.LocalFileSystem):
                temp = f"{directory}/.{name}.tmp"
                pq.write_table(table, temp, filesystem=self.fs, compression="zstd")
                self.fs.move(temp, f"{directory}/{name}")
            else:
                pq.write_table(table, f"{directory}/{name}", filesystem=self.fs, compression="zstd")
            written.append(f"{directory}/{name}")
        return written

    def _dataset(self, kind: str = "runs") -> ds.Dataset | None:
        root = f"{self.root}/{kind}"
        try:
            info = self.fs.get_file_info(root)
        except OSError:
            return None
        if info.type == pafs.FileType.NotFound:
            return None
        return ds.dataset(
            root,
            filesystem=self.fs,
            format="parquet",
            schema=_DATASET_SCHEMA if kind == "runs" else _RECORDS_DATASET_SCHEMA,
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
        return newest_runs(table)

    def runs_of(
        self, shard: int, job_id: str, lo_ms: float | None = None, hi_ms: float | None = None
    ) -> list[ArchivedRun]:
        """A job's archived runs scheduled in [lo, hi], newest first; only the days of the
        window are read."""
        return self.read(shard, (ds.field("job_id") == job_id) & _window(lo_ms, hi_ms))

    def jobs_runs(
        self, shard: int, job_ids: Sequence[str], columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """``columns`` of the archived runs of many jobs of one shard (one row per run
        id: the newest copy), for the audit: no outputs are read."""
        dataset = self._dataset()
        if dataset is None or not job_ids:
            return []
        wanted = list(dict.fromkeys(["run_id", "archived_at", *columns]))
        expression = (ds.field("shard") == shard) & ds.field("job_id").isin(list(job_ids))
        table = dataset.to_table(columns=wanted, filter=expression)
        newest: dict[str, dict[str, Any]] = {}
        for row in table.sort_by([("archived_at", "ascending")]).to_pylist():
            newest[row["run_id"]] = row
        return list(newest.values())

    def runs_by_id(self, shard: int, run_ids: Sequence[str]) -> list[ArchivedRun]:
        return self.read(shard, ds.field("run_id").isin(list(run_ids)))

    def run(self, shard: int, run_id: str) -> ArchivedRun | None:
        found = self.read(shard, ds.field("run_id") == run_id)
        return found[0] if found else None

    def records(
        self,
        shard: int,
        kind: str,
        owner_ids: Sequence[str],
        record_id: str | None = None,
        lo_ms: float | None = None,
        hi_ms: float | None = None,
    ) -> list[ArchivedRecord]:
        """The archived records of a kind of these owners (one per record id, the newest
        copy; optionally one record, or those ``at`` in [lo, hi]), newest ``at`` first."""
        dataset = self._dataset("records")
        if dataset is None or not owner_ids:
            return []
        expression = (
            (ds.field("shard") == shard)
            & (ds.field("kind") == kind)
            & ds.field("owner_id").isin(list(owner_ids))
            & _window(lo_ms, hi_ms, "at")
        )
        if record_id is not None:
            expression &= ds.field("record_id") == record_id
        table = dataset.to_table(columns=RECORDS_SCHEMA.names, filter=expression)
        newest: dict[str, dict[str, Any]] = {}
        for row in table.sort_by([("archived_at", "ascending")]).to_pylist():
            newest[row["record_id"]] = row
        out = [
            ArchivedRecord(
                row["kind"],
                row["owner_id"],
                row["record_id"],
                row["at"],
                json.loads(row["fields"]),
            )
            for row in newest.values()
        ]
        out.sort(key=lambda r: (r.at, r.record_id), reverse=True)
        return out


def open_archive(url: str) -> Archive:
    """The archive at ``url``, shared by everything in the process that reads or writes it
    (one per URL and S3 endpoint)."""
    return _open_archive(url, os.environ.get("AWS_ENDPOINT_URL"))


@lru_cache(maxsize=8)
def _open_archive(url: str, _endpoint: str | None) -> Archive:
    return Archive(url)
