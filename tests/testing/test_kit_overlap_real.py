"""The test kit's overlap model held to the real thing: a real node and worker run a job
every 2 s whose runs take 4.4 s (a handler that works that long), under ``forbid`` and
``buffer_one``, and the ledger's outcome of each tick (GET /jobs/{id}/ticks' operation)
must be what ``simulate(..., durations=...)`` says of it. The run ends fall 0.4 s or more
from any tick, so the few milliseconds a real claim takes decide nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
import trio

from conftest import wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import IntervalSchedule, JobSpec
from shardsched.ops.history.audit import job_ticks
from shardsched.store.calls import Call, server_ms
from shardsched.store.drive import drive_async
from shardsched.testing import simulate
from shardsched.worker.handlers import HandlerContext, handler

RUN = timedelta(seconds=4.4)
TICKS = 7  # 0, 2, ..., 12 s


@handler("kit-overlap-work")
async def _work(ctx: HandlerContext) -> None:
    await trio.sleep(RUN.total_seconds())  # the run's own work: how long it takes


@pytest.mark.slow  # about 20 s of real time
@pytest.mark.parametrize("overlap", ["forbid", "buffer_one"])
async def test_the_kits_overlap_is_what_a_node_and_worker_do(
    node, worker, redis, dep, overlap: str
) -> None:
    now = await drive_async(_clock(), redis)
    start = from_ms((now // 1000 + 2) * 1000)  # a whole second, 1-2 s ahead
    spec = JobSpec(
        name=f"kit-{overlap}",
        command="handler:kit-overlap-work",
        schedule=IntervalSchedule(every_s=2, start_at=start),
        overlap=overlap,
    )
    job_id = (await drive_async(ops.create_job(dep, spec), redis)).job_id
    last = start + timedelta(seconds=2 * (TICKS - 1))

    async def decided():
        got = await drive_async(job_ticks(dep, job_id, None, None, 100), redis)
        mine = [t for t in got.ticks if t.tick <= last]
        return mine if len(mine) == TICKS and all(t.outcome != "missed" for t in mine) else None

    await wait_until(decided, timeout=40)

    # what the buffered ones became needs their turn: the last run ends by 12 + 3 * 4.4
    async def settled():
        got = await drive_async(job_ticks(dep, job_id, None, None, 100), redis)
        mine = [t for t in got.ticks if t.tick <= last]
        done = all(t.run_state in (None, "succeeded") for t in mine)
        return mine if done and len(mine) == TICKS else None

    real = await wait_until(settled, timeout=60)
    sim = simulate(
        spec, start - timedelta(milliseconds=1), last - start + timedelta(milliseconds=1),
        durations={spec.name: RUN},
    )  # fmt: skip
    kit = sorted((t.at, t.outcome, t.reason) for t in sim)
    assert len(kit) == TICKS
    seen = [(t.tick, _outcome(t), t.reason) for t in real]
    expected = [
        (at, "fired" if outcome == "buffered" else outcome, why) for at, outcome, why in kit
    ]
    assert seen == expected, (overlap, seen)


def _outcome(tick) -> str:
    return str(tick.outcome)


def _clock():
    (now,) = yield [Call(("TIME",))]
    return server_ms(now)
