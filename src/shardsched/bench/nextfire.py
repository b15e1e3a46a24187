"""``shardsched bench nextfire``: what one next-fire computation and one preview cost.

The mix is the one issue 48 was found with: plain and DST-sensitive expressions, L, W
and #, in UTC and in zones with odd clocks, from instants spread over 2026 and next to
each zone's offset changes. Each call misses every memo (distinct instants), so the
figure is the engine's, not a cache's. Only ``cron_next_ms(expression, zone, after_ms,
dst)`` and the preview are called, so the same file times an older checkout too
(``PYTHONPATH=<old>/src python src/shardsched/bench/nextfire.py``): before and after in
one sitting. Medians of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

EXPRESSIONS = [
    "*/5 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0,30 2 * * *",
    "0 9 * * 1-5",
    "15 3 * * 0",
    "0 0 L * *",
    "0 0 15W * *",
    "0 9 * * 5#3",
    "0 0 1 1 *",
]
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Tehran"]
#: a few instants next to each zone's 2026 changes, the rest spread over the year
NEAR = [datetime(2026, 3, 8, 6, tzinfo=UTC), datetime(2026, 3, 29, 0, tzinfo=UTC),
        datetime(2026, 10, 3, 15, tzinfo=UTC), datetime(2026, 10, 25, 0, tzinfo=UTC),
        datetime(2026, 11, 1, 5, tzinfo=UTC)]  # fmt: skip


def instants(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        base = rng.choice(NEAR) if i % 4 == 0 else start + timedelta(days=rng.random() * 365)
        t = base + timedelta(minutes=rng.randint(-180, 180), seconds=rng.randint(0, 59))
        out.append(int(t.timestamp() * 1000))
    return out


def next_fire_us(calls: int, seed: int) -> float:
    """Microseconds a ``cron_next_ms`` call, over the mix."""
    from shardsched.core.schedule import cron_next_ms

    cases = [
        (e, z, t)
        for t, (e, z) in zip(
            instants(calls, seed),
            ((EXPRESSIONS[i % len(EXPRESSIONS)], ZONES[i // 3 % len(ZONES)]) for i in range(calls)),
            strict=True,
        )
    ]
    started = time.perf_counter()
    for expression, zone, after in cases:
        cron_next_ms(expression, zone, after)
    return (time.perf_counter() - started) / calls * 1e6


def preview_us(calls: int, seed: int) -> float:
    """Microseconds a 10-fire preview with its DST notes, over the mix."""
    from shardsched.core.models import CronSchedule, SchedulePreviewRequest
    from shardsched.core.preview import preview

    rng = random.Random(seed)
    requests = [
        SchedulePreviewRequest(
            schedule=CronSchedule(expression=rng.choice(EXPRESSIONS), timezone=rng.choice(ZONES))
        )
        for _ in range(calls)
    ]
    afters = instants(calls, seed)
    started = time.perf_counter()
    for request, after in zip(requests, afters, strict=True):
        preview(request, after)
    return (time.perf_counter() - started) / calls * 1e6


def run(args: argparse.Namespace) -> dict:
    nexts = [next_fire_us(args.calls, seed) for seed in range(args.rounds)]
    previews = [preview_us(max(args.calls // 20, 10), seed) for seed in range(args.rounds)]
    result = {
        "next_fire_us": round(statistics.median(nexts), 1),
        "next_fire_us_rounds": [round(x, 1) for x in nexts],
        "preview_us": round(statistics.median(previews), 1),
        "preview_us_rounds": [round(x, 1) for x in previews],
        "calls": args.calls,
    }
    nexts_text, previews_text = result["next_fire_us_rounds"], result["preview_us_rounds"]
    print(
        f"nextfire: {result['next_fire_us']} us a next fire (rounds {nexts_text}),"
        f" {result['preview_us']} us a 10-fire preview (rounds {previews_text})"
    )
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nextfire", help="the cost of one next fire and one preview, over a mix")
    p.add_argument("--calls", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=5)
    p.set_defaults(bench=run)


if __name__ == "__main__":  # an older checkout has no `bench nextfire`: run the file
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    run(parser.parse_args())
