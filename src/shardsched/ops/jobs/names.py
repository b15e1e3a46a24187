"""A job's name as a handle: the jobs of a name, and a creation that refuses a name
already in use.

Each shard indexes the names of its jobs (lua/lib/names.lua, kept by the scripts that
create, rename and delete a job), so the jobs of a name are one HGET per shard, not a
scan of 500,000 definitions. A creation asking for a unique name first holds a short
claim on the name (a key in the shard the name hashes to): two such creations of one
name at once cannot both pass the check; creations that do not ask are not slowed.
"""

from __future__ import annotations

import secrets

from shardsched.core.access import SDK_ACTOR
from shardsched.core.errors import NameTaken, ShardschedError
from shardsched.core.models import JobSpec, JobStatus
from shardsched.core.views import Job
from shardsched.ops.jobs.define import create_jobs
from shardsched.ops.jobs.read_page import read_jobs
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment

#: How long a unique creation holds its claim on the name at most (it lets go when done).
CLAIM_MS = 10_000


def job_ids_named(dep: Deployment, name: str) -> Op:
    """The ids the shards' indexes hold for ``name`` (sorted); two round trips at most."""
    replies = yield [Call(("HGET", dep.shard(s).names(name), name)) for s in range(dep.n_shards)]
    ids: list[str] = []
    several = []
    for s, reply in enumerate(replies):
        value = check(reply)
        if value == b"*":
            several.append(s)
        elif value is not None:
            ids.append(value.decode())
    if several:
        sets = yield [Call(("SMEMBERS", dep.shard(s).named(name))) for s in several]
        ids += [member.decode() for reply in sets for member in check(reply)]
    return sorted(ids)


def jobs_named(dep: Deployment, name: str, include_deleted: bool = False) -> Op:
    """The jobs of their own named ``name`` (deleted ones only if asked), oldest first."""
    ids = yield from job_ids_named(dep, name)
    if not ids:
        return []
    found = yield from read_jobs(dep, [(0.0, job_id.encode()) for job_id in ids])
    jobs: list[Job] = [
        job
        for job in found
        if job is not None
        and job.name == name
        and (include_deleted or job.status != JobStatus.DELETED)
    ]
    return sorted(jobs, key=lambda job: job.created_at)


def create_named(dep: Deployment, spec: JobSpec, actor: str = SDK_ACTOR) -> Op:
    """Register a job whose name no other job (not deleted) has; NameTaken otherwise,
    writing nothing. Returns JobCreated."""
    claim = dep.keys_for(spec.name).name_claim(spec.name)
    (held,) = yield [Call(("SET", claim, secrets.token_hex(8), "NX", "PX", CLAIM_MS))]
    if check(held) is None:
        raise NameTaken(spec.name, [])
    try:
        same = yield from jobs_named(dep, spec.name)
        if same:
            raise NameTaken(spec.name, [job.job_id for job in same])
        (created,) = yield from create_jobs(dep, [spec], actor=actor)
    except ShardschedError:
        yield [Call(("DEL", claim))]
        raise
    yield [Call(("DEL", claim))]
    return created
