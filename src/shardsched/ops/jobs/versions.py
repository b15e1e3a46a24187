"""A job's past: every definition it has had (its versions), and backfill, which runs the
nominal ticks of a past window that have no run yet."""

from __future__ import annotations

from itertools import islice

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.backfill import BackfillRequest, pace_ms
from shardsched.core.errors import (
    DagTaskJob,
    JobDeleted,
    ValidationError,
)
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import offset_ms
from shardsched.core.models import JobSpec, JobStatus, OnceSchedule, Schedule
from shardsched.core.queues import BAND
from shardsched.core.ticks import ticks_in
from shardsched.core.time_views import BackfillResult
from shardsched.core.timing import resolved
from shardsched.core.validation import checked
from shardsched.core.views import Job, JobVersion, JobVersions
from shardsched.ops.cold import archive_url, cold_history
from shardsched.ops.history import backfill_gaps
from shardsched.ops.jobs.read import read_job
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import jobs as lua
from shardsched.store.lua import recovery
from shardsched.store.records import parse_version

_spec_decoder = msgspec.json.Decoder(JobSpec)


def job_versions(dep: Deployment, job_id: str) -> Op:
    """Every definition the job has had, oldest first (the current one last)."""
    job = yield from read_job(dep, job_id)
    if job.dag_id is not None:
        raise DagTaskJob(job_id, job.dag_id)
    sk = dep.keys_for(job_id)
    kept, current = yield [
        Call(("HGETALL", sk.versions(job_id))),
        Call(("HMGET", sk.job(job_id), "spec", "updated", "by")),
    ]
    kept = check(kept)
    records = [(int(kept[i]), *parse_version(kept[i + 1])) for i in range(0, len(kept), 2)]
    spec_raw, updated, by = check(current)
    records.append((job.version, job.status.value.encode(), int(updated), by, spec_raw))
    records.sort()
    return JobVersions(
        job_id=job_id,
        versions=[
            JobVersion(
                version=version,
                status=JobStatus(status.decode()),
                spec=_spec_decoder.decode(spec),
                valid_from=from_ms(since),
                valid_until=from_ms(records[n + 1][2]) if n + 1 < len(records) else None,
                changed_by=by.decode() if by else None,
            )
            for n, (version, status, since, by, spec) in enumerate(records)
        ],
    )


#: Most ticks one backfill request may cover.
MAX_BACKFILL_TICKS = 10_000


def _ticks_in(schedule: Schedule, anchor_ms: int, lo: int, hi: int) -> list[int]:
    """The schedule's nominal ticks in [lo, hi], at most MAX_BACKFILL_TICKS of them."""
    ticks = list(islice(ticks_in(schedule, anchor_ms, lo, hi), MAX_BACKFILL_TICKS + 1))
    if len(ticks) > MAX_BACKFILL_TICKS:
        raise ValidationError(
            f"the window holds more than {MAX_BACKFILL_TICKS} ticks; split it", "$.until"
        )
    return ticks


def job_anchor(dep: Deployment, job: Job) -> Op:
    """The tick a job's nominal ticks are walked from (an interval's phase): its first
    fire's tick (its first timer score less its spread offset), or a once job's instant."""
    if isinstance(job.schedule, OnceSchedule):
        return to_ms(job.schedule.at)
    (first,) = yield [Call(("HGET", dep.keys_for(job.job_id).job(job.job_id), "first"))]
    planned = int(check(first) or 0)
    if not planned:
        return to_ms(job.created_at)
    return planned - offset_ms(job.job_id, job.spread_s)


def backfill(dep: Deployment, job_id: str, request: BackfillRequest, actor: str = SDK_ACTOR) -> Op:
    """Run every nominal tick of [since, until] that has no run yet, paced by max_concurrent
    (returns BackfillResult). The runs are the scheduler's own run ids, so a tick that ran
    is left alone and a backfill twice is a no-op."""
    checked(request)
    lo, hi = to_ms(request.first), to_ms(request.last)
    if hi < lo:
        raise ValidationError("until is before since", "$.until")
    job = yield from read_job(dep, job_id)
    if job.dag_id is not None:
        raise DagTaskJob(job_id, job.dag_id)
    if job.status == JobStatus.DELETED:
        raise JobDeleted(job_id)
    born = job.incarnation_started_at
    if born is not None and request.first < born:
        raise ValidationError(
            f"the job was created again at {born.isoformat()}: its ticks before then belong "
            "to its earlier incarnation; backfill from then on",
            "$.since",
        )
    sk = dep.keys_for(job_id)
    anchor = yield from job_anchor(dep, job)
    ticks = _ticks_in(resolved(job.schedule, job_id), anchor, lo, hi)
    picked = None
    if request.only is not None or request.dry_run:  # what the ledger shows, tick by tick
        picked = yield from backfill_gaps.pick(dep, job_id, lo, hi, request.only)
        owed = picked.runless
        listed = picked.listed[: backfill_gaps.MAX_LISTED]
        if request.dry_run:
            return BackfillResult(
                job_id=job_id,
                ticks=len(ticks),
                queued=0,
                already=0,
                started=0,
                dry_run=True,
                listed=listed,
                picked=len(picked.listed),
            )
    else:
        # a tick whose run left Redis for the archive ran: it is not run again
        url = yield from archive_url(dep)
        archived = {t for _, t, _, _ in cold_history(dep, url, [job_id]).firsts.get(job_id, ())}
        owed = [tick for tick in ticks if tick not in archived]
    window = f"{request.first.isoformat()}..{request.last.isoformat()}"
    band = BAND[request.priority]
    pace = pace_ms(request.per_minute)
    call = lua.backfill(sk, job_id, request.max_concurrent, owed, actor, window, band, pace)
    (reply,) = yield [call]
    reply = check(reply)
    lua.raise_refusal(reply[0], job_id)
    queues = set(ready.woken(reply[4])) if reply[3] else set()
    retried = 0
    if picked is not None and picked.failed:  # ended badly: each sent back as a new attempt
        replies = yield [recovery.retry_run(sk, rid, actor, True) for rid in picked.failed]
        for again in replies:
            again = check(again)
            if again[0] == 1:
                retried += 1
                queues |= set(ready.woken(again[2]))
    if queues:
        yield ready.push(dep.globals, [sk.shard], tuple(queues))
    return BackfillResult(
        job_id=job_id,
        ticks=len(ticks),
        queued=reply[1],
        already=reply[2] + len(ticks) - len(owed),
        started=reply[3],
        retried=retried,
        listed=None if picked is None else picked.listed[: backfill_gaps.MAX_LISTED],
        picked=None if picked is None else len(picked.listed),
    )
