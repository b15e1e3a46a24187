"""The cold archive (store/archive.py) on a local directory and on a real S3 API (moto's
server, on loopback): runs round-trip exactly, a batch written twice (a crash between
archiving and removing from Redis) reads once, partitions are day and shard, and DuckDB
reads the files as they are with the one-line query of docs/deployment.md."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import msgspec
import pytest

from shardsched.core import trace_ids
from shardsched.core.models import RunState
from shardsched.core.views import Run
from shardsched.store.archive import Archive
from shardsched.store.archive_format import SCHEMA
from shardsched.store.archive_rows import ArchivedRecord

T0 = datetime(2026, 11, 30, 23, 59, 59, 500000, tzinfo=UTC)


def run(n: int, job: str = "job_a", state: RunState = RunState.SUCCEEDED, **fields) -> Run:
    at = T0 + timedelta(seconds=n)
    base = dict(
        run_id=f"{job}:{int(at.timestamp() * 1000)}:1",
        job_id=job,
        dag_run_id=None,
        scheduled_for=at,
        state=state,
        attempt=1,
        claimed_by="w1",
        lease_expires_at=None,
        created_at=at,
        started_at=at + timedelta(milliseconds=3),
        finished_at=at + timedelta(milliseconds=40),
        exit_code=0 if state == RunState.SUCCEEDED else 2,
        reason=None if state == RunState.SUCCEEDED else "exit 2",
        job_version=3,
    )
    base["trace_id"] = f"{trace_ids.trace_id(str(base['run_id'])):032x}"  # as Redis's say
    return Run(**{**base, **fields})


def exercise(archive: Archive) -> None:
    runs = [(run(n), f"out {n}\n".encode()) for n in range(3)]
    spread = run(1).scheduled_for + timedelta(seconds=17)  # a spread job's planned time
    runs[1] = (run(1, planned_for=spread), runs[1][1])
    runs.append((run(3, state=RunState.FAILED), b"\xff binary \x00"))
    runs.append((run(0, job="job_b", dag_run_id="dag_x:1"), b""))
    first = datetime(2026, 12, 2, tzinfo=UTC)
    files = archive.write(7, runs, first)
    # the batch spans two days (23:59:59.5 and then 00:00:00.5...): a file each
    assert len(files) == 2 and {f.split("/day=")[1][:10] for f in files} == {
        "2026-11-30",
        "2026-12-01",
    }
    assert all("/shard=7/" in f for f in files)
    # a crash after archiving, before removing from Redis: the next round archives the
    # same runs again (one of them changed meanwhile, e.g. a retried dead letter)
    again = [runs[1], (run(3, state=RunState.DEAD_LETTER), b"again")]
    archive.write(7, again, first + timedelta(minutes=1))

    got = archive.runs_of(7, "job_a")
    assert [a.run.run_id for a in got] == [r.run_id for r, _ in reversed(runs[:4])]
    by_id = {a.run.run_id: a for a in got}
    for r, output in runs[:3]:
        assert by_id[r.run_id].run == msgspec.structs.replace(r, archived=True)
        assert by_id[r.run_id].output == output
    newest = by_id[runs[3][0].run_id]
    assert newest.run.state == RunState.DEAD_LETTER and newest.output == b"again"
    assert newest.archived_at == first + timedelta(minutes=1)
    assert archive.run(7, runs[4][0].run_id).run.dag_run_id == "dag_x:1"
    assert archive.run(7, "job_a:1:1") is None
    assert archive.runs_of(8, "job_a") == []  # another shard's partition
    # skip records and DAG runs: their fields as they were, the newest copy of each
    skip = ArchivedRecord("skip", "job_a", "1:2:2:overlap", T0, {"decided": "5"})
    dag_run = ArchivedRecord("dag_run", "dag_x", "dag_x:1", T0, {"st": "failed", "t:a": "f"})
    archive.write_records(7, [skip, dag_run], first)
    changed = dag_run._replace(fields={"st": "succeeded"})
    archive.write_records(7, [changed], first + timedelta(seconds=1))
    assert archive.records(7, "skip", ["job_a"]) == [skip]
    assert archive.records(7, "dag_run", ["dag_x"]) == [changed]
    assert archive.records(7, "dag_run", ["dag_x"], record_id="dag_x:2") == []
    assert archive.records(7, "skip", ["job_b"]) == []


def test_a_local_archive(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    archive = Archive(f"file://{root}")
    assert archive.runs_of(7, "job_a") == []  # nothing archived yet: no error
    exercise(archive)
    assert not list(root.rglob(".*.tmp")), "no half-written file is left behind"
    # the docs' query: DuckDB reads the files as they are, partitions as columns
    query = (
        f"SELECT job_id, count(DISTINCT run_id) FROM read_parquet('{root}/runs/**/*.parquet', "
        "hive_partitioning = true) WHERE shard = 7 GROUP BY job_id ORDER BY job_id"
    )
    assert duckdb.sql(query).fetchall() == [("job_a", 4), ("job_b", 1)]
    schema = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{root}/runs/**/*.parquet')")
    readme = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    runner = re.escape('.venv/bin/python -c "import duckdb, sys; duckdb.sql(sys.argv[1]).show()"')
    pattern = "^" + runner + ' "(.+)"$'
    (one_liner,) = re.findall(pattern, readme, re.MULTILINE)
    counts = duckdb.sql(one_liner.replace(".shardsched/archive", str(root))).fetchall()
    assert sorted(counts) == [
        ("job_a", "dead_letter", 1),
        ("job_a", "succeeded", 3),
        ("job_b", "succeeded", 1),
    ]
    assert [row[0] for row in schema.fetchall()][: len(SCHEMA)] == SCHEMA.names


@pytest.mark.parametrize("column", ["planned_for", "deadline_missed"])
def test_a_file_from_before_a_column_reads_with_none(tmp_path: Path, column: str) -> None:
    """A file written before a column was added reads as it was, that column null."""
    import pyarrow.parquet as pq

    root = tmp_path / "archive"
    archive = Archive(f"file://{root}")
    late = msgspec.structs.replace(run(0), deadline_missed="finish")
    (written,) = archive.write(7, [(late, b"x")], datetime(2026, 12, 2, tzinfo=UTC))
    (kept,) = archive.runs_of(7, "job_a")
    assert kept.run.deadline_missed == "finish"
    table = pq.read_table(written)
    old = table.drop_columns([column])
    assert old.schema.names == [n for n in SCHEMA.names if n != column]
    pq.write_table(old, written)
    (got,) = archive.runs_of(7, "job_a")
    assert getattr(got.run, column) is None and got.output == b"x"


def test_an_s3_archive(s3: str) -> None:
    archive = Archive(s3)
    assert archive.runs_of(7, "job_a") == []
    exercise(archive)


def test_a_bad_archive_url_is_refused() -> None:
    with pytest.raises(ValueError, match="file:///path or s3://"):
        Archive("ftp://example/runs")
