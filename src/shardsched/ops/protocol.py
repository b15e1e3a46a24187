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

from shardsched.core.errors import ConflictError, RunNotFound
from shardsched.core.instants import from_ms
from shardsched.core.models import RetryPolicy
from shardsched.core.retry import verdict
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.keys import CONSUMER_GROUP

WorkerId = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[^:\s]+$")]
#: A ready-stream entry id, as claim answered it.
EntryId = Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,20}-[0-9]{1,20}$")]
Token = Annotated[int, msgspec.Meta(ge=0, le=2**53)]


class _ExecSpec(msgspec.Struct):
    """What the protocol needs of a job's or a DAG task's spec (the rest is skipped)."""

    command: str = ""
    timeout_s: float = 3600.0
    lease_s: float = 30.0
    retry_policy: RetryPolicy = msgspec.field(default_factory=RetryPolicy)


_spec_decoder = msgspec.json.Decoder(_ExecSpec)


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


def heartbeat(dep: Deployment, worker_id: str, req: HeartbeatRequest) -> Op:
    g = dep.globals
    info = msgspec.json.encode(
        {
            "capacity": req.capacity,
            "capacity_free": req.capacity_free,
            "running": 0,
            "completed": 0,
            "draining": False,
            "started_ms": 0,
        }
    )
    (reply,) = yield [
        Call((worker_id, 30_000, info), script="heartbeat", keys=(g.workers, g.worker_info))
    ]
    return HeartbeatResponse(worker_id=worker_id, at=from_ms(int(check(reply)[0])))


def claim(dep: Deployment, req: ClaimRequest) -> Op:
    """Claim up to max_runs, shard by shard from a random starting shard."""
    runs: list[ClaimedRun] = []
    start = random.randrange(dep.n_shards)
    for offset in range(dep.n_shards):
        sk = dep.shard((start + offset) % dep.n_shards)
        (reply,) = yield [
            Call(
                (sk.base, CONSUMER_GROUP, req.worker_id, req.max_runs - len(runs)),
                script="claim",
                keys=(sk.ready,),
            )
        ]
        reply = check(reply)
        for i in range(0, len(reply), 8):
            spec = _spec_decoder.decode(reply[i + 2]) if reply[i + 2] else None
            runs.append(
                ClaimedRun(
                    run_id=reply[i + 1].decode(),
                    entry_id=reply[i].decode(),
                    token=int(reply[i + 5]),
                    command=spec.command if spec else "",
                    timeout_s=spec.timeout_s if spec else 0.0,
                    lease_s=spec.lease_s if spec else 30.0,
                    attempt=int(reply[i + 4]),
                    scheduled_for=from_ms(int(reply[i + 3])),
                    lease_expires_at=from_ms(int(reply[i + 6])),
                )
            )
        if len(runs) >= req.max_runs:
            break
    return ClaimResponse(runs)


def renew(dep: Deployment, rid: str, req: RenewRequest) -> Op:
    sk = dep.keys_for(rid)
    (reply,) = yield [
        Call(
            (CONSUMER_GROUP, req.worker_id, sk.base, req.entry_id, rid, req.token),
            script="renew_runs",
            keys=(sk.ready,),
        )
    ]
    reply = check(reply)
    if reply[1] == -3:
        raise ConflictError(f"run {rid!r} was cancelled: stop it")
    if reply[1] != 1:
        raise ConflictError(f"worker {req.worker_id!r} does not hold run {rid!r}")
    return RenewResponse(rid, from_ms(int(reply[2])))


def complete(dep: Deployment, rid: str, req: CompleteRequest) -> Op:
    sk = dep.keys_for(rid)
    parts = rid.rsplit(":", 2)
    if len(parts) != 3 or not parts[2].isdigit():
        raise RunNotFound(rid)
    job_id, _tick, attempt = parts
    spec_raw, now = yield [Call(("HGET", sk.job(job_id), "spec")), Call(("TIME",))]
    policy = _spec_decoder.decode(spec_raw).retry_policy if spec_raw else RetryPolicy()
    now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
    state, retry_at = verdict(req.status == "success", int(attempt), policy, now_ms)
    item = (
        req.entry_id,
        rid,
        req.token,
        state,
        "" if req.exit_code is None else req.exit_code,
        req.reason or "",
        req.output.encode(),
        "",
        retry_at,
    )
    (reply,) = yield [
        Call(
            (
                CONSUMER_GROUP,
                req.worker_id,
                sk.base,
                dep.globals.wake_channel,
                sk.shard,
                dep.globals.ready_channel,
                *item,
            ),
            script="complete",
            keys=(sk.ready, sk.retries, sk.dead_letter),
        )
    ]
    code = check(reply)[1]
    if code == -1:
        raise RunNotFound(rid)
    if code == -2:
        raise ConflictError(f"worker {req.worker_id!r} does not hold run {rid!r}: not applied")
    return CompleteResponse(rid, state)
