"""Per-team tick accounting on a real node: ``shardsched_schedule_ticks_total`` counts each
tick once, by the team label of its job (never by job id), as fired, or skipped with its
reason, including the ticks fire.lua's overlap policy held back, which the skip counter
by reason now counts too."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import generate_latest

from conftest import wait_until
from shardsched.core.instants import from_ms
from shardsched.runtime.metrics import Metrics


def _value(metrics: Metrics, **labels: str) -> float:
    series = metrics.schedule_ticks.labels(labels["team"], labels["outcome"], labels["reason"])
    return series._value.get()


async def test_ticks_are_counted_by_team_with_overlap_skips(node, worker, http, redis) -> None:
    today = from_ms(await redis.time_ms()).date()
    days = [(today + timedelta(days=d)).isoformat() for d in (-1, 0, 1)]
    assert (await http.put("/api/v1/calendars/off", json={"dates": days})).status_code == 201
    every = {"type": "interval", "every_s": 0.3}
    jobs = [
        {"name": "fast", "command": "true", "schedule": every, "labels": {"team": "payments"}},
        {"name": "slow", "command": "sleep 5", "schedule": every, "overlap": "forbid",
         "labels": {"team": "search"}},
        {"name": "off", "command": "true", "schedule": every, "labels": {"team": "search"},
         "calendars": {"exclude": ["off"]}},
        {"name": "plain", "command": "true", "schedule": every},
    ]  # fmt: skip
    for body in jobs:
        assert (await http.post("/api/v1/jobs", json=body)).status_code == 201
    m = node.metrics

    async def counted() -> bool:
        return (
            _value(m, team="payments", outcome="fired", reason="") >= 3
            and _value(m, team="search", outcome="skipped", reason="overlap") >= 3
            and _value(m, team="search", outcome="skipped", reason="calendar") >= 3
            and _value(m, team="none", outcome="fired", reason="") >= 3
        )

    await wait_until(counted, timeout=20)
    # the slow job fired once and then had every tick held back by its overlap policy
    assert 1 <= _value(m, team="search", outcome="fired", reason="") <= 2
    assert m.ticks_skipped.labels("overlap")._value.get() >= 3
    assert m.ticks_skipped.labels("calendar")._value.get() >= 3
    exported = generate_latest(m.registry).decode()
    lines = [x for x in exported.splitlines() if x.startswith("shardsched_schedule_ticks_total")]
    assert any('reason="overlap"' in x and 'team="search"' in x for x in lines), lines
    assert not any("job_" in x for x in lines)  # by team, never by job
    teams = {x.split('team="')[1].split('"')[0] for x in lines}
    assert teams == {"payments", "search", "none"}, teams
