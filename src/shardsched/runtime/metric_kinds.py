"""Kinds of series prometheus_client does not have, which :mod:`.metrics` builds on: a
label limiter (a bounded number of distinct values, the rest ``_other``), a histogram
observed a batch at a time (a fire call's thousands of lags in one step), and a window of
the last minute's values whose quantiles a node publishes in its registry entry."""

from __future__ import annotations

import bisect
import math
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

OTHER = "_other"


class LabelLimiter:
    """At most ``limit`` distinct values of a label; later ones become ``_other``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) < self.limit:
            self._seen.add(value)
            return value
        return OTHER


class BatchHistogram:
    """A histogram fed in bulk, ``observe(value, count)``: a 25,000-run burst fires a few
    distinct lags many times each, and one call per distinct value keeps the hot path
    cheap. Exported as an ordinary Prometheus histogram."""

    def __init__(
        self, name: str, documentation: str, buckets: tuple[float, ...], registry: Any
    ) -> None:
        self.name, self.documentation = name, documentation
        self._bounds = [*buckets, math.inf]
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        registry.register(self)

    def observe(self, value: float, count: int = 1) -> None:
        self._counts[bisect.bisect_left(self._bounds, value)] += count
        self._sum += value * count

    @property
    def count(self) -> int:
        return sum(self._counts)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative, buckets = 0, []
        for bound, n in zip(self._bounds, self._counts, strict=True):
            cumulative += n
            buckets.append((floatToGoString(bound), cumulative))
        yield HistogramMetricFamily(
            self.name, self.documentation, buckets=buckets, sum_value=self._sum
        )


class Window:
    """(value, count) observations of the last ``span_s`` seconds, for a p99 "over the last
    minute" that the status screen shows (published in the node's registry entry).

    Kept as one small histogram a second (values rounded to a millisecond below a second,
    to 10 ms below 10 s, to 0.1 s above), so its size grows with the distinct lags, not
    with the firings: at 830 one-run fire calls a second a list of observations held
    50,000 items, and sorting them twice a heartbeat stopped the node's firing for up to
    60 ms every half second (the steady state's trigger-lag p99)."""

    def __init__(self, span_s: float = 60.0) -> None:
        self.span_s = span_s
        self._slots: deque[tuple[int, dict[float, int]]] = deque()

    @staticmethod
    def _rounded(value: float) -> float:
        size = abs(value)
        return round(value, 3 if size < 1 else 2 if size < 10 else 1)

    def add(self, value: float, count: int = 1, now: float | None = None) -> None:
        second = math.floor(time.monotonic() if now is None else now)
        if not self._slots or self._slots[-1][0] != second:
            self._slots.append((second, {}))
        slot = self._slots[-1][1]
        key = self._rounded(value)
        slot[key] = slot.get(key, 0) + count

    def _prune(self, now: float | None) -> None:
        now = time.monotonic() if now is None else now
        while self._slots and self._slots[0][0] + 1 <= now - self.span_s:
            self._slots.popleft()

    def _merged(self, now: float | None) -> dict[float, int]:
        self._prune(now)
        merged: dict[float, int] = {}
        for _, slot in self._slots:
            for value, count in slot.items():
                merged[value] = merged.get(value, 0) + count
        return merged

    def total(self, now: float | None = None) -> int:
        return sum(self._merged(now).values())

    def quantile(self, q: float, now: float | None = None) -> float | None:
        return self.quantiles((q,), now)[0]

    def quantiles(self, qs: tuple[float, ...], now: float | None = None) -> list[float | None]:
        """Each of the quantiles ``qs`` (0..1) of the window, from one merge of its slots."""
        merged = self._merged(now)
        ordered = sorted(merged.items())
        total = sum(merged.values())
        out: list[float | None] = []
        for q in qs:
            if not total:
                out.append(None)
                continue
            rank, seen, found = max(math.ceil(q * total), 1), 0, ordered[-1][0]
            for value, count in ordered:
                seen += count
                if seen >= rank:
                    found = value
                    break
            out.append(found)
        return out
