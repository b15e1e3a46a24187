"""The deployment's trigger lag over time: what each node recorded every LAG_SAMPLE_S
(shard/maintenance.py) into one stream kept a day, so the console's chart starts with
the last hour, not with the moment the page was opened."""

from __future__ import annotations

from shardsched.core.instants import from_ms
from shardsched.core.views import LagHistory, LagPoint
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment

#: The most samples an answer holds (a day of 15 s samples of 5 nodes is 28,800).
MAX_POINTS = 5000
DEFAULT_WINDOW_MS = 3_600_000


def _seconds(raw: bytes | None) -> float | None:
    return float(raw) if raw else None


def lag_history(dep: Deployment, since_ms: int | None = None, until_ms: int | None = None) -> Op:
    """The samples in [since, until] (default: the last hour), oldest first; returns
    LagHistory (``truncated`` when the window held more than MAX_POINTS)."""
    if since_ms is None:
        (now,) = yield [Call(("TIME",))]
        since_ms = server_ms(now) - DEFAULT_WINDOW_MS
    hi = "+" if until_ms is None else str(until_ms)
    (reply,) = yield [
        Call(("XRANGE", dep.globals.lag_history, str(since_ms), hi, "COUNT", MAX_POINTS + 1))
    ]
    entries = check(reply)
    points = []
    for entry_id, flat in entries[:MAX_POINTS]:
        fields = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}
        points.append(
            LagPoint(
                at=from_ms(int(entry_id.split(b"-")[0])),
                node_id=fields.get(b"n", b"").decode(),
                p50_s=_seconds(fields.get(b"p50")),
                p99_s=_seconds(fields.get(b"p99")),
                fired_1m=int(fields.get(b"f") or 0),
            )
        )
    return LagHistory(points=points, truncated=len(entries) > MAX_POINTS)
