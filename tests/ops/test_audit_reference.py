"""An audit that walks the engine it audits is blind: an engine that loses a tick expects
nothing there and finds nothing missing (issue 48). With ``reference`` the audit expects
a cron schedule's ticks from the slow model (core/cron_reference.py): the engine is broken
here on purpose, and the lost tick shows as missing."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
import trio

from nodes import fired_at_least
from shardsched import ops
from shardsched.core import schedule as engine
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.models import CronSchedule, JobSpec, Timing
from shardsched.ops.history import audit
from shardsched.ops.history.ledger import JobHistory, Outcome, Segment, account
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis


def _losing(lost: set[int]):  # type: ignore[no-untyped-def]
    """The engine, broken: the ticks in ``lost`` are stepped over, silently."""
    real = engine.cron_next_ms

    def cron_next_ms(expression, timezone, after_ms, dst=msgspec.UNSET, dialect=msgspec.UNSET):  # type: ignore[no-untyped-def]
        tick = real(expression, timezone, after_ms, dst, dialect)
        while tick in lost:
            tick = real(expression, timezone, tick, dst, dialect)
        return tick

    return cron_next_ms


def test_a_tick_the_engine_loses_is_missing_by_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bug of repro 1, put back: 03:30 EDT (the gap's 02:30) is stepped over. The
    node fired what the engine said; the engine's audit agrees with it; the model's not."""
    schedule = CronSchedule(expression="0,30 2 * * *", timezone="America/New_York")
    gap_0230 = to_ms(datetime(2026, 3, 8, 7, 30, tzinfo=UTC))  # 03:30 EDT
    monkeypatch.setattr(engine, "cron_next_ms", _losing({gap_0230}))
    after, end = (
        to_ms(datetime(2026, 3, 7, 12, tzinfo=UTC)),
        to_ms(datetime(2026, 3, 10, tzinfo=UTC)),
    )
    fired, t = [], after
    while (t := engine.next_fire_ms(schedule, t)) is not None and t <= end:  # type: ignore[assignment]
        fired.append(t)
    assert gap_0230 not in fired
    history = JobHistory(
        job_id="nightly",
        segments=[
            Segment(first=fired[0], timing=Timing(schedule=schedule), end=None, closed_at=None)
        ],
        timer=None,
        runs={tick: [(f"nightly:{tick}:1", tick + 3, False)] for tick in fired},
        skips=[],
    )
    blind = account(history, end)
    assert [r.outcome for r in blind] == [Outcome.FIRED] * len(fired)
    seeing = account(history, end, reference=True)
    assert [to_ms(r.tick) for r in seeing if r.outcome == Outcome.MISSING] == [gap_0230]
    assert sum(r.outcome == Outcome.FIRED for r in seeing) == len(fired)


@pytest.mark.slow
async def test_a_node_on_a_broken_engine_is_caught_by_the_reference_audit(
    nursery: trio.Nursery, redis: Redis, dep: ops.Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: a real node fires an every-minute job by an engine that steps over its
    second tick; the audit by the engine says OK, the audit by the model says missing."""
    now = await redis.time_ms()
    first = (now // 60_000 + 1) * 60_000
    lost = first + 60_000
    monkeypatch.setattr(engine, "cron_next_ms", _losing({lost}))
    spec = JobSpec(name="minutely", command="true", schedule=CronSchedule(expression="* * * * *"))
    (job,) = await drive_async(ops.create_jobs(dep, [spec]), redis)
    manager = ShardManager(redis, dep, node_id="broken-engine", renew_every_s=0.5)
    await nursery.start(manager.run)
    await fired_at_least(redis, dep, [job.job_id], 2, timeout=200)  # first, then first + 2 min
    blind = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert blind.missing == 0 and blind.fired == 2, blind
    seeing = await drive_async(audit.audit(dep, settle_s=0, reference=True), redis)
    assert seeing.missing == 1, seeing
    (problem,) = seeing.problem_jobs
    assert [to_ms(p.tick) for p in problem.problems] == [lost], from_ms(lost)
