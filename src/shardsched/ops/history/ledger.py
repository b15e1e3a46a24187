"""A job's ledger read back for the audit: its schedule segments, the ticks each should
have fired, and what became of each tick (a run, a recorded skip, or nothing).

Used by :mod:`.audit` (the whole report) and by ``/jobs/{id}/ticks``.
"""

from __future__ import annotations

import bisect
import enum
import heapq
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

import msgspec

from shardsched.core import cron_reference
from shardsched.core.catchup import Skip
from shardsched.core.dst import suppressed_between
from shardsched.core.errors import JobNotFound
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import IntervalSchedule, Timing, cron_specs
from shardsched.core.schedule import parse_cron
from shardsched.core.ticks import ticks_in
from shardsched.ops.cold import archive_url, cold_history
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op
from shardsched.store.deployment import Deployment

_timing_decoder = msgspec.json.Decoder(Timing)
#: Bound on ticks enumerated for one job (a 1-second job over ~11 days).
MAX_TICKS = 1_000_000


class Outcome(enum.StrEnum):
    FIRED = "fired"
    SKIPPED = "skipped"
    PENDING = "pending"
    MISSING = "missing"
    DUPLICATED = "duplicated"


class TickRecord(msgspec.Struct, omit_defaults=True):
    """One nominal tick of a job and its fate (the body of ``GET /jobs/{id}/ticks``)."""

    tick: datetime
    outcome: Outcome
    run_id: str | None = None
    lag_s: float | None = None
    reason: str | None = None
    decided_at: datetime | None = None
    planned: datetime | None = None  #: the tick plus the job's spread offset, if any
    #: how its run ended (or stands), judged on its last attempt: what an operator asks of a
    #: tick ("did it work?"), where ``outcome`` says only that the scheduler fired it
    run_state: str | None = None
    attempts: int | None = None  #: the attempts its run has taken so far
    last_run_id: str | None = None  #: its last attempt (``run_id`` is the first)


class TickList(msgspec.Struct):
    job_id: str
    ticks: list[TickRecord]
    truncated: bool


@dataclass
class Segment:
    first: int
    timing: Timing
    end: int | None  #: ticks >= end are not expected (the timer score when it closed)
    closed_at: int | None  #: when it closed, bounding ticks when ``end`` is unknown


@dataclass
class JobHistory:
    job_id: str
    segments: list[Segment]
    timer: int | None  #: the job's current timer score (its pending tick)
    #: tick -> [(run id, created ms, a backfill's)], attempt 1
    runs: dict[int, list[tuple[str, int, bool]]]
    skips: list[tuple[Skip, int]]  #: (record, decided at)
    quarantined: bool = False  #: paused by its owner because it could not be planned
    #: its runs in the cold archive: run id -> (state, the attempt that followed)
    archived: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    #: ticks held for later: by its overlap (buf:) or queued as backfill (bfq:): pending
    buffered: set[int] = field(default_factory=set)


def load_histories(dep: Deployment, job_ids: list[str]) -> Op:
    """The histories of many jobs in two round trips; raises JobNotFound for a missing one."""
    calls = []
    for job_id in job_ids:
        sk = dep.keys_for(job_id)
        calls += [
            Call(("HMGET", sk.job(job_id), "first", "timing", "pr")),
            Call(("LRANGE", sk.segments(job_id), 0, -1)),
            Call(("ZRANGE", sk.runs_of(job_id), 0, -1, "WITHSCORES")),
            Call(("ZRANGE", sk.skips(job_id), 0, -1)),
            Call(("ZSCORE", sk.timer, job_id)),
            Call(("LRANGE", sk.watch.buffer(job_id), 0, -1)),
            Call(("ZRANGE", sk.backfill_queue(job_id), 0, -1)),
        ]
    replies = yield calls
    scheduled_of = []
    for n, job_id in enumerate(job_ids):
        (first, _timing, _pr), _segs, runs, _skips, _score, _buf, _q = replies[7 * n : 7 * n + 7]
        if _timing is None:
            raise JobNotFound(job_id)
        dag = k.is_dag_id(job_id)  # a DAG's runs index lists its DAG runs <dag>:<tick>
        scheduled_of.append(
            [
                (runs[i].decode(), int(float(runs[i + 1])))
                for i in range(0, len(runs), 2)
                # attempt 1 of a scheduled tick, not a manual run
                if (dag or runs[i].endswith(b":1")) and b":t" not in runs[i]
            ]
        )
    created_calls = [
        Call(("HMGET", _record_key(dep, job_id, rid), "c", "bf"))
        for job_id, scheduled in zip(job_ids, scheduled_of, strict=True)
        for rid, _ in scheduled
    ]
    created = iter((yield created_calls) if created_calls else [])
    cold = cold_history(dep, (yield from archive_url(dep)), job_ids)
    histories = []
    for n, (job_id, scheduled) in enumerate(zip(job_ids, scheduled_of, strict=True)):
        (first, timing, reason), segs, _runs, skips, score, buffered, queued = replies[
            7 * n : 7 * n + 7
        ]
        if not segs and first:  # never changed: its one segment is in the job hash
            segs = [b"o|" + first + b"|" + timing]
        by_tick: dict[int, list[tuple[str, int, bool]]] = defaultdict(list)
        hot = set()
        for rid, tick in scheduled:
            c, backfill = next(created)
            if c is not None:
                by_tick[tick].append((rid, int(c), backfill is not None))
                hot.add(rid)
        for rid, tick, c, backfill in cold.firsts.get(job_id, ()):
            if rid not in hot:  # archived, and gone from Redis (or hot would win)
                by_tick[tick].append((rid, c, backfill))
        segments = _segments(segs, job_id)
        timer = None if score is None else int(float(score))
        if timer is not None and segments:  # the timer's score is a planned time
            timer -= offset_ms(job_id, segments[-1].timing.spread_s)
        histories.append(
            JobHistory(
                job_id=job_id,
                segments=segments,
                timer=timer,
                runs=dict(by_tick),
                skips=[_skip(raw) for raw in dict.fromkeys([*skips, *cold.skips.get(job_id, ())])],
                quarantined=bool(reason and reason.startswith(b"quarantined:")),
                archived=cold.states.get(job_id, {}),
                buffered={int(t) for t in [*buffered, *queued]},
            )
        )
    return histories


def _record_key(dep: Deployment, job_id: str, rid: str) -> str:
    sk = dep.keys_for(job_id)
    return sk.dag_run(rid) if k.is_dag_id(job_id) else sk.run(rid)


def load_history(dep: Deployment, job_id: str) -> Op:
    (history,) = yield from load_histories(dep, [job_id])
    return history


def _skip(raw: bytes) -> tuple[Skip, int]:
    text, _, decided = raw.decode().rpartition(":")
    return Skip.decode(text), int(decided)


def _segments(events: list[bytes], job_id: str) -> list[Segment]:
    """The segments as nominal ticks: a segment's first fire and its end are timer scores,
    planned times, each its tick plus the job's spread offset then (core/jitter.py)."""
    segments: list[Segment] = []
    for raw in events:
        kind, _, rest = raw.decode().partition("|")
        if kind == "o":
            first, _, text = rest.partition("|")
            timing = _timing_decoder.decode(text)
            off = offset_ms(job_id, timing.spread_s)
            segments.append(Segment(int(first) - off, timing, None, None))
        elif kind == "c" and segments and segments[-1].closed_at is None:
            score, _, at = rest.partition("|")
            off = offset_ms(job_id, segments[-1].timing.spread_s)
            segments[-1].end = int(float(score)) - off if score else None
            segments[-1].closed_at = int(at) - off  # ticks planned after it did not fire
    return segments


def _bound(segment: Segment, hi: int) -> int:
    """The last instant of [.., hi] the segment expects ticks in."""
    if segment.end is not None:
        return min(hi, segment.end - 1)
    if segment.closed_at is not None:
        return min(hi, segment.closed_at)
    return hi


def nominal_ticks(segment: Segment, lo: int, hi: int, reference: bool = False) -> Iterator[int]:
    """The segment's ticks in [lo, hi], jumping straight to lo where the schedule allows;
    with ``reference``, a cron schedule's from the slow model (core/cron_reference.py),
    not the engine that scheduled them: an engine that lost a tick cannot hide it."""
    timing = segment.timing
    schedule = timing.schedule
    if isinstance(schedule, IntervalSchedule):  # the segment's first fire is its phase
        schedule = IntervalSchedule(every_s=schedule.every_s)
    lo = max(lo, segment.first, timing.starts_ms or 0)  # its window: starts_at, ends_at
    bound = _bound(segment, hi if timing.ends_ms is None else min(hi, timing.ends_ms))
    if reference and cron_reference.covers(schedule):
        yield from cron_reference.schedule_decisions(schedule, lo, bound)[0][:MAX_TICKS]
        return
    ticks = ticks_in(schedule, segment.first, lo, bound)
    yield from islice(ticks, MAX_TICKS)


def dst_skipped(
    segment: Segment, lo: int, hi: int, reference: bool = False
) -> list[tuple[int, str]]:
    """The wall times of a cron segment in [lo, hi] its DST rule does not fire at (where
    they stand on the real clock, and why: core/dst.py): skipped ticks, by decision."""
    schedule = segment.timing.schedule
    lo, hi = max(lo, segment.first), _bound(segment, hi)
    if hi < lo:
        return []
    if reference and cron_reference.covers(schedule):
        return cron_reference.schedule_decisions(schedule, lo, hi)[1]
    out = []
    for spec in cron_specs(schedule):
        fields = parse_cron(spec.expression, spec.dialect)
        found = suppressed_between(fields, spec.timezone, spec.dst, from_ms(lo - 1), from_ms(hi))
        out += [(to_ms(s.instant), s.reason) for s in found]
    return out


def account(
    history: JobHistory,
    horizon: int,
    lo: int = 0,
    hi: int | None = None,
    limit: int | None = None,
    reference: bool = False,
) -> list[TickRecord]:
    """Every nominal tick of the job in [lo, min(hi, horizon)] with its outcome; with
    ``limit``, the first ``limit`` + 1 only (enumeration stops there: a dense job's ticks
    are never all built to answer one page); ``reference``: see :func:`nominal_ticks`."""
    hi = horizon if hi is None else min(hi, horizon)
    # skip records as ranges, looked up per tick (never expanded: a catch-up limit can
    # cover millions of ticks)
    skips = sorted((skip.first, skip.last, skip.reason, decided) for skip, decided in history.skips)
    firsts = [s[0] for s in skips]
    records: list[TickRecord] = []
    open_segment = history.segments[-1] if history.segments else None
    pending_from = history.timer if open_segment and open_segment.closed_at is None else None
    ticks = heapq.merge(
        *(nominal_ticks(segment, lo, hi, reference) for segment in history.segments)
    )
    spread = open_segment.timing.spread_s if open_segment else 0.0
    off = offset_ms(history.job_id, spread)
    max_fires = open_segment.timing.max_fires if open_segment else None
    fired = 0
    previous = None
    for tick in ticks:
        if tick == previous:
            continue
        previous = tick
        if limit is not None and len(records) > limit:
            break
        if max_fires is not None and fired >= max_fires:
            break  # it fired them all: no tick of it is owed after
        runs = history.runs.get(tick, [])
        skip = None
        i = bisect.bisect_right(firsts, tick) - 1
        for j in range(i, max(i - 8, -1), -1):  # skips barely overlap: look at a few back
            if skips[j][1] >= tick:
                skip = (skips[j][2], skips[j][3])
                break
        if skip and len(runs) == 1 and runs[0][2]:
            skip = None  # a skipped tick run later by a backfill: fired once, late
        if len(runs) + (1 if skip else 0) > 1:
            records.append(
                TickRecord(from_ms(tick), Outcome.DUPLICATED, runs[0][0] if runs else None)
            )
        elif runs:
            rid, created, _ = runs[0]
            fired += 1
            lag = (created - tick - off) / 1000  # a spread tick is late from its planned time
            planned = from_ms(tick + off) if off else None
            records.append(TickRecord(from_ms(tick), Outcome.FIRED, rid, lag, planned=planned))
        elif skip:
            records.append(
                TickRecord(
                    from_ms(tick), Outcome.SKIPPED, reason=skip[0], decided_at=from_ms(skip[1])
                )
            )
        elif (pending_from is not None and tick >= pending_from) or tick in history.buffered:
            records.append(TickRecord(from_ms(tick), Outcome.PENDING))
        else:
            records.append(TickRecord(from_ms(tick), Outcome.MISSING))
    return _with_dst_skips(records, history.segments, lo, hi, limit, reference)


def _with_dst_skips(
    records: list[TickRecord],
    segments: list[Segment],
    lo: int,
    hi: int,
    limit: int | None,
    reference: bool,
) -> list[TickRecord]:
    """The records with the segments' DST decisions among them, in order (one at the
    instant of a tick is that tick's, not another record)."""
    seen = {r.tick for r in records}
    extra = [
        TickRecord(from_ms(t), Outcome.SKIPPED, reason=reason)
        for segment in segments
        for t, reason in dst_skipped(segment, lo, hi, reference)
        if from_ms(t) not in seen
    ]
    if not extra:
        return records
    merged = sorted(records + extra, key=lambda r: r.tick)
    return merged if limit is None else merged[: limit + 1]
