"""The node's lag over the last minute (runtime/metric_kinds.Window): its quantiles match a
sort of every observation to the millisecond, it forgets what is older than its span,
and it holds one small histogram a second, whatever the firing rate (a list of every
observation, sorted twice a heartbeat, stalled firing at 830 runs a second)."""

from __future__ import annotations

import math
import random

from shardsched.runtime.metric_kinds import Window


def _naive(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)), 1) - 1]


def test_quantiles_match_every_observation_sorted() -> None:
    rng = random.Random(7)
    window = Window(60.0)
    values = [round(rng.expovariate(1 / 0.004), 3) for _ in range(20_000)]
    for i, v in enumerate(values):
        window.add(v, now=1000.0 + i / 1000)  # 20 s of observations
    p50, p99, top = window.quantiles((0.5, 0.99, 1.0), now=1020.0)
    assert p50 == _naive(values, 0.5) and p99 == _naive(values, 0.99)
    assert top == max(values)
    assert window.quantile(0.99, now=1020.0) == p99
    assert window.total(now=1020.0) == len(values)


def test_counts_and_rounding() -> None:
    window = Window(60.0)
    window.add(0.0014, count=199, now=5.0)
    window.add(2.345, count=1, now=5.5)
    window.add(12.34, count=1, now=5.5)
    assert window.total(now=6.0) == 201
    assert window.quantiles((0.5, 0.99, 1.0), now=6.0) == [0.001, 0.001, 12.3]
    assert window.quantile(0.995, now=6.0) == 2.35


def test_it_forgets_what_is_older_than_its_span() -> None:
    window = Window(60.0)
    window.add(0.5, now=100.2)
    window.add(0.001, now=130.0)
    assert window.quantile(1.0, now=160.0) == 0.5  # 100.2 is within 60 s of 160.0
    assert window.quantile(1.0, now=161.5) == 0.001
    assert window.total(now=191.5) == 0 and window.quantile(0.5, now=191.5) is None


def test_its_size_follows_the_distinct_lags_not_the_firings() -> None:
    window = Window(60.0)
    for i in range(60 * 830):  # a minute of one-run fire calls at 830 a second
        window.add((i % 7) / 1000, now=i / 830)
    slots = window._slots
    assert len(slots) == 60 and all(len(slot) <= 7 for _, slot in slots)
    assert window.total(now=60 * 830 / 830 - 0.001) == 60 * 830
