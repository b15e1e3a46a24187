"""Job operations: register, read, change, pause, trigger, delete, backfill; runs by id.

Written once as :mod:`shardsched.store.calls` generators, so the router, the SDK and the
CLI drive the same code over their own clients.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from shardsched.core.access import SDK_ACTOR
from shardsched.core.app_sets import check_owner
from shardsched.core.concurrency import key_or_none
from shardsched.core.errors import (
    IdTaken,
    ValidationError,
)
from shardsched.core.field_errors import field_error, within
from shardsched.core.instants import from_ms
from shardsched.core.labels import ACCOUNT_LABEL
from shardsched.core.models import JobSpec, TaskSpec, Timing
from shardsched.core.queues import stored as stored_queue
from shardsched.core.schedule import FirstFires
from shardsched.core.timing import per_job, timing_of
from shardsched.core.validation import validate_spec
from shardsched.core.views import JobCreated
from shardsched.ops import triggers as after
from shardsched.ops.dags.manage import join_dag
from shardsched.ops.schedules.calendars import require_calendars
from shardsched.store import keys as k
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import jobs as lua

_spec_encoder = msgspec.json.Encoder()
_spec_decoder = msgspec.json.Decoder(JobSpec)
_task_decoder = msgspec.json.Decoder(TaskSpec)
_timing_decoder = msgspec.json.Decoder(Timing)


def validate_specs(specs: Sequence[JobSpec]) -> None:
    """Validate every spec; a bad one raises ValidationError with its field as
    ``$[i].field`` when there are several."""
    ids: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.id is not None:
            if spec.id in ids:
                raise ValidationError(f"id {spec.id!r} is given twice", f"$[{i}].id")
            ids.add(spec.id)
        try:
            validate_spec(spec)
        except msgspec.ValidationError as exc:
            err = field_error(exc, msgspec.to_builtins(spec), JobSpec)
            raise (err if len(specs) == 1 else within(err, i)) from None


def create_jobs(
    dep: Deployment,
    specs: Sequence[JobSpec],
    validated: bool = False,
    actor: str = SDK_ACTOR,
    writer: str = "",
    held: bool = False,
) -> Op:
    """:func:`_create_jobs`, holding the lock of ``after`` chains when one runs after
    another (ops/triggers.py)."""
    op = _create_jobs(dep, specs, validated, actor, writer, held)
    if any(r.after for spec in specs for r in spec.on):
        return (yield from after.locked(dep, op))
    return (yield from op)


def _create_jobs(
    dep: Deployment,
    specs: Sequence[JobSpec],
    validated: bool = False,
    actor: str = SDK_ACTOR,
    writer: str = "",
    held: bool = False,
) -> Op:
    """Register jobs (validated first: an invalid one writes nothing); returns JobCreated list.
    ``held``: with no timer entry (a job to be paused next: no tick can fire before).

    One script call per shard, all in one round trip. A job with depends_on joins its
    dependencies' DAG as a new task (one script call each). ``validated``: the caller
    already ran :func:`validate_specs` on them (a bulk registration, before its first batch).
    ``writer``: the app set a deploy writes as ('' by hand: core/apps.check_owner).
    """
    if not validated:
        validate_specs(specs)
    for spec in specs:
        check_owner(None, spec.labels, writer)
    yield from require_calendars(dep, [s.calendars for s in specs if s.calendars])
    if any(spec.depends_on for spec in specs):
        created = []
        for spec in specs:
            if spec.depends_on:
                created.append((yield from join_dag(dep, spec, actor)))
            else:
                created += yield from _create_jobs(dep, [spec], actor=actor)
        return created
    chained = {  # a job whose id is made here cannot be anyone's upstream yet
        spec.id or f"(new job {i})": spec.on
        for i, spec in enumerate(specs)
        if any(r.after for r in spec.on)
    }
    before: list[str] = []
    after_write: list[str] = []
    if chained:
        batch = frozenset(spec.id for spec in specs if spec.id)
        labels_of = {spec.id: spec.labels for spec in specs if spec.id}
        before, after_write = yield from after.check_chain(dep, chained, batch, labels_of)
    (now, selected) = yield [Call(("TIME",)), Call(("SMEMBERS", dep.globals.selectors))]
    now_ms = server_ms(now)
    firsts = FirstFires(now_ms)  # one cron computation per distinct timing
    timings: dict[tuple[Any, ...], tuple[bytes, Timing]] = {}
    by_shard: dict[int, list[lua.NewJob]] = {}
    plan = []
    has_h: dict[bytes, bool] = {}  # per schedule: whether it has an H of its own per job
    listening: dict[str, list[str]] = {}  # event -> its listeners among them
    runs_after: list[tuple[str, list[str]]] = []  # a job, the upstreams it runs after
    labelled: list[tuple[str, dict[str, str]]] = []  # a job, its labels (for selectors)
    fresh = iter(k.new_job_ids(sum(not spec.id for spec in specs)))
    for spec in specs:
        job_id = spec.id or next(fresh)
        if spec.id is not None:  # the id is the job's key, not part of its definition
            spec = msgspec.structs.replace(spec, id=None)
        assert spec.schedule is not None  # validated: a job of its own has one
        schedule = _spec_encoder.encode(spec.schedule)
        h = has_h.get(schedule)
        if h is None:
            h = has_h[schedule] = per_job(spec.schedule)
        timing_key = (  # every field timing_of reads: jobs alike share one timing
            schedule,
            spec.catchup,
            spec.misfire_grace_s,
            spec.overlap,
            spec.max_catchup,
            spec.spread_s,
            spec.starts_at,
            spec.ends_at,
            spec.max_fires,
            spec.start_deadline_s,
            spec.finish_deadline_s,
            spec.skip_late_start,
            None if spec.calendars is None else _spec_encoder.encode(spec.calendars),
            spec.labels.get(ACCOUNT_LABEL, ""),
            spec.catchup_per_minute,
            None if spec.backlog is None else spec.backlog.code(),
            job_id if h else "",  # its H is its own
        )
        known = timings.get(timing_key)
        if known is None:
            made = timing_of(spec, job_id)
            known = timings[timing_key] = (_spec_encoder.encode(made), made)
        timing = known[0]
        first = None if held else firsts.of(timing, known[1], job_id)
        plan.append((job_id, first))
        if spec.labels:
            labelled.append((job_id, spec.labels))
        for rule in spec.on:
            if rule.event is not None:
                listening.setdefault(rule.event, []).append(job_id)
        ups = after.upstreams(spec.on)
        if ups:
            runs_after.append((job_id, ups))
        by_shard.setdefault(k.shard_of(job_id, dep.n_shards), []).append(
            lua.NewJob(
                job_id,
                _spec_encoder.encode(spec),
                timing,
                first,
                round(spec.lease_s * 1000),
                spec.auto_pause_after,
                stored_queue(
                    spec.queue, spec.priority, key_or_none(spec.concurrency_key, spec.labels)
                ),
                spec.name,
                _ms(spec.expect_success_within_s),
            )
        )
    if listening:  # the index first: it holds every listener, and maybe more
        yield [Call(("SADD", dep.globals.listeners(e), *ids)) for e, ids in listening.items()]
    if runs_after:  # upstreams that exist: marked first, so none of their ends is missed
        existing_ups = set(before)
        calls = [
            c
            for j, ups in runs_after
            for c in after.marks(
                dep, j, [u for u in ups if u in existing_ups or after.is_selector(u)]
            )
        ]
        if calls:
            yield calls
        for j, ups in runs_after:  # the jobs there are that a selector names
            yield from after.mark_selected(dep, j, [u for u in ups if after.is_selector(u)])
    shards = list(by_shard)
    replies = yield [
        lua.register_job(dep.shard(s), dep.globals, by_shard[s], actor) for s in shards
    ]
    registered: dict[str, lua.Registered] = {}
    for s, reply in zip(shards, replies, strict=True):
        for new, code in zip(by_shard[s], lua.decode_registered(check(reply)), strict=True):
            registered[new.job_id] = code
    if runs_after and after_write:  # upstreams made in this very batch: marked now
        fresh_ups = set(after_write)
        yield [
            c
            for j, ups in runs_after
            for c in after.marks(dep, j, [u for u in ups if u in fresh_ups])
        ]
    # jobs a selector names, as they are made (one round trip only when any is named)
    yield from after.join_selectors(dep, selected, labelled)
    created = []
    first_at: dict[int, datetime] = {}  # one datetime per distinct instant
    for job_id, first in plan:
        code = registered[job_id]
        if code == lua.Registered.TAKEN:  # chosen, or a 48-bit random id collided
            raise IdTaken(job_id)
        at = None if first is None else first_at.get(first)
        if first is not None and at is None:
            at = first_at[first] = from_ms(first)
        again = code == lua.Registered.RECREATED
        created.append(JobCreated(job_id=job_id, next_run_at=at, recreated=again))
    return created


def create_job(dep: Deployment, spec: JobSpec, actor: str = SDK_ACTOR) -> Op:
    (created,) = yield from create_jobs(dep, [spec], actor=actor)
    return created


#: What a job's view carries of its definition: every field of the spec but its id (not
#: part of the definition) and the trigger rule (a DAG task's: the view's may be None).


def _ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)
