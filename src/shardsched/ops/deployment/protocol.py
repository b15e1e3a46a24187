"""The seed's internal worker protocol, for workers that cannot reach Redis directly.

``POST /internal/workers/{id}/heartbeat``, ``POST /internal/runs/claim``,
``POST /internal/runs/{id}/lease/renew``, ``POST /internal/runs/{id}/complete`` on the
router, implemented by the very Lua scripts the Redis-speaking worker uses (claim.lua,
renew_runs.lua, complete.lua, heartbeat.lua), so the fencing is the same: a renewal or
completion from a worker that no longer holds the run is refused (409) and recorded.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shardsched.core.errors import ConflictError, RunNotFound, ValidationError
from shardsched.core.ids import parse_run_id
from shardsched.core.instants import from_ms
from shardsched.core.models import ExecSpec, RetryPolicy
from shardsched.core.retry import verdict
from shardsched.core.text import UNPRINTABLE
from shardsched.store import ready
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import leases
from shardsched.store.lua import runs as runs_lua
from shardsched.store.records import WorkerInfo

#: No colon, no whitespace, nothing unprintable (core/text), to the very end (``$`` alone
#: lets a trailing newline through in Python; ``(?!\n)`` says the same in JSON Schema).
WorkerId = Annotated[
    str, msgspec.Meta(min_length=1, max_length=200, pattern=rf"^[^:\s{UNPRINTABLE}]+$(?!\n)")
]
#: A ready-stream entry id, as claim answered it.
EntryId = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,20}-[0-9]{1,20}$(?!\n)")]
Token = Annotated[int, msgspec.Meta(ge=0, le=2**53)]


_spec_decoder = msgspec.json.Decoder(ExecSpec)


class HeartbeatRequest(msgspec.Struct, forbid_unknown_fields=True):
    capacity: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 1
    capacity_free: Annotated[int, msgspec.Meta(ge=0, le=100_000)] = 0


class HeartbeatResponse(msgspec.Struct):
    worker_id: str
    at: datetime


class ClaimRequest(msgspec.Struct, forbid_unknown_fields=True):
    worker_id: WorkerId
    max_runs: Annotated[int, msgspec.Meta(ge=1, le=100)] = 1


class ClaimedRun(msgspec.Struct):
    run_id: str
    entry_id: str
    token: int
    command: str
    timeout_s: float
    lease_s: float
    attempt: int
    scheduled_for: datetime
    lease_expires_at: datetime


class ClaimResponse(msgspec.Struct):
    runs: list[ClaimedRun]


class RenewRequest(msgspec.Struct, forbid_unknown_fields=True):
    worker_id: WorkerId
    entry_id: EntryId
    token: Token


class RenewResponse(msgspec.Struct):
    run_id: str
    lease_expires_at: datetime


class CompleteRequest(msgspec.Struct, forbid_unknown_fields=True):
    worker_id: WorkerId
    entry_id: EntryId
    token: Token
    status: Literal["success", "failure"]
    exit_code: int | None = None
    reason: Annotated[str, msgspec.Meta(max_length=500)] | None = None
    output: Annotated[str, msgspec.Meta(max_length=65536)] = ""


class CompleteResponse(msgspec.Struct):
    run_id: str
    state: str


def check_worker_id(worker_id: str) -> None:
    """A worker id from a URL path, validated like one in a body (a 422 names it)."""
    try:
        msgspec.convert(worker_id, WorkerId)
    except msgspec.ValidationError as exc:
        raise ValidationError(f"worker id: {exc}", "$.worker_id") from None


def heartbeat(dep: Deployment, worker_id: str, req: HeartbeatRequest) -> Op:
    check_worker_id(worker_id)
    g = dep.globals
    info = msgspec.json.encode(WorkerInfo(capacity=req.capacity, capacity_free=req.capacity_free))
    call = leases.heartbeat(g.workers, g.worker_info, worker_id, 30_000, info, answer=False)
    (reply,) = yield [call]
    now_ms, _members = leases.decode_heartbeat(check(reply))
    return HeartbeatResponse(worker_id=worker_id, at=from_ms(now_ms))


def claim(dep: Deployment, req: ClaimRequest) -> Op:
    """Claim up to max_runs, shard by shard from a random starting shard."""
    runs: list[ClaimedRun] = []
    start = random.randrange(dep.n_shards)
    for offset in range(dep.n_shards):
        sk = dep.shard((start + offset) % dep.n_shards)
        (reply,) = yield [runs_lua.claim(sk, dep.globals, req.worker_id, req.max_runs - len(runs))]
        for c in runs_lua.decode_claimed(check(reply)):
            spec = _spec_decoder.decode(c.spec_json) if c.spec_json else None
            runs.append(
                ClaimedRun(
                    run_id=c.run_id,
                    entry_id=c.entry_id,
                    token=c.token,
                    command=spec.command if spec else "",
                    timeout_s=spec.timeout_s if spec else 0.0,
                    lease_s=spec.lease_s if spec else 30.0,
                    attempt=c.attempt,
                    scheduled_for=from_ms(c.scheduled_ms),
                    lease_expires_at=from_ms(c.lease_ms),
                )
            )
        if len(runs) >= req.max_runs:
            break
    return ClaimResponse(runs)


def renew(dep: Deployment, rid: str, req: RenewRequest) -> Op:
    sk = dep.keys_for(rid)
    delivery = runs_lua.Delivery(req.entry_id, rid, req.token)
    (reply,) = yield [runs_lua.renew_runs(sk, req.worker_id, [delivery])]
    ((code, lease_ms),) = runs_lua.decode_renewed(check(reply))
    if code == runs_lua.Held.CANCELLED:
        raise ConflictError(f"run {rid!r} was cancelled: stop it")
    if code != runs_lua.Held.APPLIED:
        raise ConflictError(f"worker {req.worker_id!r} does not hold run {rid!r}")
    return RenewResponse(rid, from_ms(lease_ms))


def complete(dep: Deployment, rid: str, req: CompleteRequest) -> Op:
    sk = dep.keys_for(rid)
    try:
        job_id, _tick, attempt = parse_run_id(rid)
    except ValueError:
        raise RunNotFound(rid) from None
    spec_raw, now = yield [Call(("HGET", sk.job(job_id), "spec")), Call(("TIME",))]
    policy = _spec_decoder.decode(spec_raw).retry_policy if spec_raw else RetryPolicy()
    now_ms = server_ms(now)
    state, retry_at = verdict(req.status == "success", int(attempt), policy, now_ms)
    completion = runs_lua.Completion(
        runs_lua.Delivery(req.entry_id, rid, req.token),
        state,
        req.exit_code,
        req.reason or "",
        req.output.encode(),
        None,
        retry_at,
    )
    quota = runs_lua.OutputQuota.of(
        runs_lua.DEFAULT_JOB_OUTPUT_QUOTA, runs_lua.DEFAULT_OUTPUT_QUOTA, dep.n_shards
    )
    (reply,) = yield [runs_lua.complete(sk, dep.globals, req.worker_id, [completion], quota)]
    completed = runs_lua.decode_completed(check(reply))
    (code,) = completed.codes
    if completed.released:
        yield ready.push(dep.globals, [sk.shard], completed.queues)
    if code == runs_lua.Held.NO_SUCH_RUN:
        raise RunNotFound(rid)
    if code == runs_lua.Held.NOT_HELD:
        raise ConflictError(f"worker {req.worker_id!r} does not hold run {rid!r}: not applied")
    return CompleteResponse(rid, state)
