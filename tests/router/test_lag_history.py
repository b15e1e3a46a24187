"""The lag history behind the console's chart (issue #31): every node records its
trigger lag every LAG_SAMPLE_S into one stream kept a day; GET /api/v1/status/lag reads a
window of it."""

from __future__ import annotations

from datetime import datetime

import pytest

from conftest import wait_until
from shardsched.shard import maintenance


@pytest.fixture(autouse=True)
def often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maintenance, "LAG_SAMPLE_S", 0.3)


async def test_each_node_records_its_lag_and_the_api_reads_a_window(node, worker, http, redis, dep):
    key = dep.globals.lag_history
    # a sample from two days ago, as if the stream were that old: the next sample trims it
    await redis.execute(
        "EVAL", "redis.call('DEL', KEYS[1]) redis.call('XADD', KEYS[1], '1000-0', 'n', 'old')",
        1, key,
    )  # fmt: skip
    body = {"name": "tick", "command": "true", "schedule": {"type": "interval", "every_s": 0.2}}
    job_id = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def measured() -> list | None:
        points = (await http.get("/api/v1/status/lag")).json()["points"]
        fired = [p for p in points if p["fired_1m"] > 0 and p["p99_s"] is not None]
        return points if len(fired) >= 3 else None

    points = await wait_until(measured, timeout=15)
    await http.patch(f"/api/v1/jobs/{job_id}", json={"status": "paused"})
    assert {p["node_id"] for p in points} == {node.node_id}
    assert all(p["p50_s"] is None or 0 <= p["p50_s"] <= p["p99_s"] < 5 for p in points)
    ats = [datetime.fromisoformat(p["at"]) for p in points]
    assert ats == sorted(ats)
    assert (await redis.execute("XRANGE", key, "-", "1000")) == [], "older than a day: trimmed"
    # a window: since/until bound it
    middle = points[len(points) // 2]["at"]
    at = datetime.fromisoformat(middle)
    later = (await http.get("/api/v1/status/lag", params={"since": middle})).json()["points"]
    assert later and all(datetime.fromisoformat(p["at"]) >= at for p in later)
    early = (await http.get("/api/v1/status/lag", params={"until": middle})).json()["points"]
    assert early and all(datetime.fromisoformat(p["at"]) <= at for p in early)
    bad = await http.get("/api/v1/status/lag", params={"since": "yesterday"})
    assert bad.status_code == 422
