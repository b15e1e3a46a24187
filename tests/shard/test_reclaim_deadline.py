"""The owner's reclaim waits for the earliest lease deadline: idle, it does not poll every
second; a run whose worker stops renewing is taken back right after its lease lapses."""

from __future__ import annotations

import trio

from conftest import drive_list, rounds_later, wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops import listing
from shardsched.ops.runs import events
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis


async def test_reclaim_waits_for_the_earliest_lease_deadline(
    node: ShardManager, redis: Redis, dep: ops.Deployment
) -> None:
    with trio.fail_after(30):
        rounds = node.reclaimer.rounds
        await rounds_later(lambda: node.maintainer.rounds, 3)  # 3 s idle: no run held anywhere
        assert node.reclaimer.rounds - rounds <= 1, "idle, the owner must not poll every second"

        spec = JobSpec(name="r", schedule=OnceSchedule(at=from_ms(0)), command="x", lease_s=2)
        job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
        sk = dep.keys_for(job_id)

        async def claimed() -> list:
            # a worker that claims and then never renews (a process frozen or gone)
            reply = await call_script(redis, runs_lua.claim(sk, dep.globals, "ghost", 10))
            return runs_lua.decode_claimed(reply)

        (entry,) = await wait_until(claimed)
        rounds = node.reclaimer.rounds

        async def back_to_scheduled() -> bool:
            runs = await drive_list(listing.runs_page(dep, job_id), redis)
            return runs[0].state == "scheduled" and runs[0].claimed_by is None

        await wait_until(back_to_scheduled, timeout=10)
        now_ms = await redis.time_ms()
        late_ms = now_ms - entry.lease_ms
        assert 0 <= late_ms < 500, f"reclaimed {late_ms} ms after the lease lapsed"
        # the rounds that did it: one for the deadline claim.lua announced, not one a second
        assert node.reclaimer.rounds - rounds <= 3
        # and the event stream says so: claimed by the ghost, taken back from it
        page = await drive_async(events.events_page(dep, job_id=job_id), redis)
        changes = [(e.old, e.new, e.worker, e.detail) for e in page.events]
        assert changes == [
            (None, "scheduled", None, None),
            ("scheduled", "running", "ghost", None),
            ("running", "scheduled", "ghost", "reclaimed"),
        ]
