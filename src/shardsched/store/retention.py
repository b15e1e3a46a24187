"""Which history leaves Redis now: retention, read one slice of a shard at a time.

The shard owner walks its shard's jobs and DAGs in slices (:data:`JOBS_PER_SLICE` of
them, at most :data:`RUNS_PER_SLICE` items), so clean-up is many small steps between
firings, never one long one. A run (or DAG run) leaves when it is finished and either
finished longer ago than its job's (DAG's) ``retention.max_age_s`` (default: the
deployment's ``--retention-s``) or is older than the newest ``retention.max_runs``. It
never leaves while it is not finished, while it is an unhandled dead letter (in the
dead-letter set), or, for a DAG task's run, while its DAG run is open. A skip record
leaves once it was decided longer ago than the age. The owner archives a slice first and
removes it second (``lua/expire_history.lua`` checks each item is still as it was read).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from shardsched.core.instants import from_ms
from shardsched.core.models import Retention, RunState
from shardsched.store import keys as k
from shardsched.store.archive_rows import ArchivedRecord, ToArchive
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua.retention import Expiring
from shardsched.store.records import RUN_FIELDS, RunRecord, run_record, run_view

#: Jobs one slice looks at.
JOBS_PER_SLICE = 100
#: Runs one slice takes, at most.
RUNS_PER_SLICE = 1000
#: Pages of a job's oldest runs one slice reads, each 4x the last: runs that must stay
#: (unhandled dead letters, runs still open) at the head of a job's history do not hold
#: back the finished ones behind them.
PAGES = 4
_TERMINAL = frozenset(
    s.value
    for s in (
        RunState.SUCCEEDED,
        RunState.FAILED,
        RunState.DEAD_LETTER,
        RunState.SKIPPED,
        RunState.CANCELLED,
    )
)
_SETTLED = (b"succeeded", b"failed", b"cancelled")


@dataclass(frozen=True, slots=True)
class RetentionDefaults:
    """The deployment-wide rules, for jobs whose spec leaves them unset, and how often the
    owner applies them."""

    max_age_s: int | None = 7 * 86400
    max_runs: int | None = None
    every_s: float = 30.0  #: between passes of the owner


class _Kept(msgspec.Struct):
    """The one field of a job's (or DAG's) spec retention reads."""

    retention: Retention | None = None


_kept_decoder = msgspec.json.Decoder(_Kept)


class Slice(NamedTuple):
    runs: list[ToArchive]  #: runs to archive
    records: list[ArchivedRecord]  #: DAG runs and skip records to archive
    expiring: list[Expiring]  #: then remove, as archived
    next_index: int  #: where the next slice starts in the shard's jobs; 0: a pass ended
    now_ms: int
    more: bool = False  #: it took all it could: more is due than one pass takes


def _rules(spec: bytes | None, defaults: RetentionDefaults) -> tuple[int | None, int | None]:
    kept = _kept_decoder.decode(spec).retention if spec else None
    age = kept.max_age_s if kept and kept.max_age_s else defaults.max_age_s
    count = kept.max_runs if kept and kept.max_runs else defaults.max_runs
    return age, count


class _Rule(NamedTuple):
    cutoff: int | None  #: finished at or before this (ms) leaves
    over: int  #: this many of the oldest are beyond the count


def retention_slice(
    dep: Deployment,
    shard: int,
    start: int,
    defaults: RetentionDefaults,
    jobs: int = JOBS_PER_SLICE,
    budget: int = RUNS_PER_SLICE,
) -> Op:
    """The history of the shard's jobs and DAGs ``start`` .. ``start + jobs - 1`` (in
    creation order) that leaves Redis now (returns a :class:`Slice`)."""
    sk = dep.shard(shard)
    now_raw, raw_ids = yield [Call(("TIME",)), Call(("ZRANGE", sk.jobs, start, start + jobs - 1))]
    now_ms = server_ms(check(now_raw))
    ids = [raw.decode() for raw in check(raw_ids)]
    next_index = start + jobs if len(ids) == jobs else 0
    if not ids:
        return Slice([], [], [], next_index, now_ms)
    # a DAG's task jobs are not in the jobs index: they come with their DAG, its rules
    heads = yield [Call(("HMGET", sk.job(any_id), "spec", "tasks")) for any_id in ids]
    owners: list[tuple[str, bytes | None]] = []  # (job or DAG id, the spec with its rules)
    for any_id, head in zip(ids, heads, strict=True):
        spec, tasks = check(head)
        owners.append((any_id, spec))
        if k.is_dag_id(any_id) and tasks:
            owners += [(k.task_job_id(any_id, t), spec) for t in tasks.decode().split(",")]
    cards = yield [Call(("ZCARD", sk.runs_of(any_id))) for any_id, _ in owners]
    rules: dict[str, _Rule] = {}
    for (any_id, spec), card_reply in zip(owners, cards, strict=True):
        card = int(check(card_reply))
        age, count = _rules(spec, defaults)
        rule = _Rule(None if age is None else now_ms - age * 1000, card - min(card, count or card))
        if card and (rule.cutoff is not None or rule.over):
            rules[any_id] = rule
    records, expiring = yield from _old_skips(dep, shard, rules, budget)
    each = max(10, budget // max(1, len(rules)))  # the first page of a job's oldest runs
    offset = dict.fromkeys(rules, 0)
    runs: list[ToArchive] = []
    more = False
    for page in range(PAGES):
        if not offset or len(expiring) >= budget:
            break
        size = each * 4**page
        pending = list(offset)
        found = yield [
            Call(("ZRANGE", sk.runs_of(j), offset[j], offset[j] + size - 1, "WITHSCORES"))
            for j in pending
        ]
        owner: dict[str, str] = {}  # candidate run or DAG run id -> its job or DAG
        aged: set[str] = set()
        deeper: dict[str, int] = {}
        for j, reply in zip(pending, found, strict=True):
            flat = check(reply)
            rule, n = rules[j], 0
            for i in range(0, len(flat), 2):
                rank, score = offset[j] + i // 2, float(flat[i + 1])
                if rank >= rule.over and (rule.cutoff is None or score > rule.cutoff):
                    break  # past the oldest that may leave: the rest are newer
                owner[flat[i].decode()] = j
                if rank >= rule.over:
                    aged.add(flat[i].decode())  # only its finish time can make it leave
                n += 1
            if n == size:  # the page was all candidates: there may be more behind it
                deeper[j] = offset[j] + size
        room = budget - len(expiring)
        took, items, dag_records = yield from _leaving(dep, shard, owner, aged, rules, room)
        runs += took
        records += dag_records
        expiring += items
        # a job whose page left whole goes on next pass; one held back by runs that must
        # stay (dead letters, open runs) reads its next page now
        left = Counter(k.job_of_run(item.id) for item in items if item.kind != "s")
        more |= any(left[j] == size for j in deeper)
        offset = {j: at for j, at in deeper.items() if left[j] < size}
    return Slice(runs, records, expiring, next_index, now_ms, more or len(expiring) >= budget)


def _old_skips(dep: Deployment, shard: int, rules: dict[str, _Rule], budget: int) -> Op:
    """The skip records decided before each job's cutoff: (records, Expiring items)."""
    sk = dep.shard(shard)
    aging = [j for j, rule in rules.items() if rule.cutoff is not None and not k.is_dag_id(j)]
    replies = yield [
        Call(("ZRANGE", sk.skips(j), "-inf", rules[j].cutoff, "BYSCORE", "LIMIT", 0, budget))
        for j in aging
    ]
    records: list[ArchivedRecord] = []
    expiring: list[Expiring] = []
    for j, reply in zip(aging, replies, strict=True):
        cutoff = rules[j].cutoff
        for raw in check(reply):  # "first:last:count:reason:decided"
            record = raw.decode()
            first, decided = record.split(":", 1)[0], record.rpartition(":")[2]
            if cutoff is not None and int(decided) <= cutoff and len(records) < budget // 2:
                records.append(ArchivedRecord("skip", j, record, from_ms(int(first)), {}))
                expiring.append(Expiring.skip(j, record))
    return records, expiring


def _leaving(
    dep: Deployment,
    shard: int,
    owner: dict[str, str],
    aged: set[str],
    rules: dict[str, _Rule],
    room: int,
) -> Op:
    """Of the candidate runs and DAG runs, those finished and free to leave, at most
    ``room``: (runs to archive, their Expiring items, DAG runs as records). A candidate in
    ``aged`` is there by its age alone (not beyond the job's count): its finish time must
    be past the cutoff."""
    sk = dep.shard(shard)
    chosen = list(owner)
    calls: list[Call] = []
    for rid in chosen:
        if k.is_dag_id(owner[rid]):
            calls.append(Call(("HGETALL", sk.dag_run(rid))))
        else:
            calls += [
                Call(("HMGET", sk.run(rid), *RUN_FIELDS)),
                Call(("GET", sk.output(rid))),
                Call(("ZSCORE", sk.dead_letter, rid)),
            ]
    replies = iter((yield calls) if calls else [])
    expiring: list[Expiring] = []
    records: list[ArchivedRecord] = []
    picked: list[tuple[str, RunRecord, bytes]] = []

    def leaves(rid: str, finished: int | str | None) -> bool:
        cutoff = rules[owner[rid]].cutoff
        if rid not in aged:
            return True
        return cutoff is not None and finished is not None and int(finished) <= cutoff

    for rid in chosen:
        if k.is_dag_id(owner[rid]):
            flat = check(next(replies))
            hash_ = {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}
            done = hash_.get("f")
            settled = hash_.get("st") in ("succeeded", "failed", "cancelled")
            if settled and leaves(rid, done) and len(expiring) < room:
                at = from_ms(int(hash_["s"]))
                records.append(ArchivedRecord("dag_run", owner[rid], rid, at, hash_))
                expiring.append(Expiring.dag_run(rid, int(done) if done else None))
            continue
        fields, output, dead = (check(next(replies)) for _ in range(3))
        record = run_record(fields)
        if record is None or record.state not in _TERMINAL or dead is not None:
            continue
        if leaves(rid, record.finished_ms):
            picked.append((rid, record, output or b""))
    open_dags: set[str] = set()
    dag_runs = sorted({r.dag_run_id for _, r, _ in picked if r.dag_run_id is not None})
    if dag_runs:
        states = yield [Call(("HGET", sk.dag_run(d), "st")) for d in dag_runs]
        open_dags = {
            d
            for d, st in zip(dag_runs, (check(s) for s in states), strict=True)
            if st is not None and st not in _SETTLED
        }
    out: list[ToArchive] = []
    for rid, record, output in picked:
        if record.dag_run_id in open_dags or len(expiring) >= room:
            continue
        run = msgspec.structs.replace(run_view(rid, record), lease_expires_at=None)
        out.append(ToArchive(run, output, record.backfill is not None, record.next_run_id))
        expiring.append(Expiring.run(rid, record.finished_ms))
    return out, expiring, records
