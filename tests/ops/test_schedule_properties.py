"""Property-based: whatever schedule a client sends (cron expressions, zones, intervals,
instants, extreme numbers), the API answers 2xx or 4xx, never 5xx, and a 4xx changes
nothing in Redis. The same for the preview, which must also list strictly increasing
fire times."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import uuid
import zoneinfo
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
import redis as redis_py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import RedisServer, start_api_node


class Live:
    def __init__(self, base: str, namespace: str, port: int, proc: subprocess.Popen) -> None:
        # a new connection per request: the node closes a connection idle for its read
        # timeout (10 s), and an example drawn slowly on a loaded box can send its request
        # on a pooled connection just as the node closes it (keep-alive's race, which is
        # the client's to retry, and would fail the example as "disconnected")
        self.http = httpx.Client(
            base_url=base, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
        )
        self.redis = redis_py.Redis(port=port)
        self.namespace = namespace
        self.proc = proc

    #: keys the running node rewrites on its own (its heartbeat, the lease it renews)
    #: written by the node on its own clock: its heartbeat, leases, counters, the lag it
    #: samples every 15 s, and each shard's mark that its older jobs' names are indexed
    VOLATILE = (
        b":{g}:nodes", b":{g}:nodeinfo", b"}:owner", b"}:stats", b":{g}:lag", b"}:names_indexed",
        b":{g}:ntflease", b":{g}:ntfout",
    )  # fmt: skip

    def keyspace(self) -> dict[bytes, bytes]:
        keys = sorted(
            key
            for key in self.redis.scan_iter(f"{self.namespace}:*", count=1000)
            if not key.endswith(self.VOLATILE)
        )
        return dict(zip(keys, [self.redis.dump(key) for key in keys], strict=True))


@pytest.fixture(scope="module")
def live(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A node process serving the API (the in-process fixtures do not outlive one
    hypothesis example)."""
    namespace = "pp" + uuid.uuid4().hex[:8]
    proc, base = start_api_node(redis_server, namespace, tmp_path_factory.mktemp("props") / "n.log")
    live = Live(base, namespace, redis_server.port, proc)
    yield live
    live.http.close()
    live.redis.close()
    proc.terminate()
    proc.wait(timeout=10)


ZONES = sorted(zoneinfo.available_timezones())

number = st.integers(min_value=-5, max_value=70).map(str)
field = st.one_of(
    st.just("*"),
    number,
    st.tuples(number, number).map(lambda t: f"{t[0]}-{t[1]}"),
    st.tuples(st.sampled_from(["*", "0", "5"]), st.integers(0, 70)).map(lambda t: f"{t[0]}/{t[1]}"),
    st.lists(number, min_size=2, max_size=3).map(",".join),
    st.sampled_from(["L", "?", "MON", "jan", "#", "", "W", "1#2"]),
)
cron = st.one_of(
    st.lists(field, min_size=5, max_size=5).map(" ".join),
    st.lists(field, min_size=0, max_size=7).map(" ".join),
    st.sampled_from(["0 0 30 2 *", "0 0 29 2 *", "* * * * *", "30 2 * * *", "@hourly"]),
    st.text(max_size=30),
)
zone = st.one_of(st.sampled_from(ZONES), st.sampled_from(["UTC", "Not/AZone", "", "../etc"]))
instant = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
).map(lambda d: d.isoformat())
offset_instant = st.tuples(
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)),
    st.integers(-14 * 60, 14 * 60),
).map(lambda t: t[0].replace(tzinfo=timezone(timedelta(minutes=t[1]))).isoformat())
seconds = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 0.05, 0.1, 1, 86400, 366 * 86400, 1e308, -1, 10**30]),
)
schedule = st.one_of(
    st.fixed_dictionaries({"type": st.just("cron"), "expression": cron, "timezone": zone}),
    st.fixed_dictionaries(
        {"type": st.just("interval"), "every_s": seconds},
        optional={"start_at": st.one_of(instant, offset_instant)},
    ),
    st.fixed_dictionaries({"type": st.just("once"), "at": st.one_of(instant, offset_instant)}),
)
job = st.fixed_dictionaries(
    {"name": st.just("prop"), "command": st.just("true"), "schedule": schedule},
    optional={
        "misfire_grace_s": seconds,
        "timeout_s": seconds,
        "max_catchup": st.integers(-1, 10**6),
        "catchup": st.sampled_from(["all", "latest", "none", "some"]),
    },
)

SETTINGS = settings(
    max_examples=int(os.environ.get("SHARDSCHED_PROPERTY_EXAMPLES", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(body=job)
def test_registering_any_schedule_is_2xx_or_a_4xx_that_changes_nothing(live, body) -> None:
    before = live.keyspace()
    reply = live.http.post(
        "/api/v1/jobs",
        content=json.dumps(body),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code < 500, (body, reply.text)
    if reply.status_code >= 400:
        assert reply.json()["error"]["code"], reply.text
        assert live.keyspace() == before, body
    else:
        assert reply.status_code == 201, reply.text
        # out of the way of the next examples: a job that fires changes the keyspace
        gone = live.http.delete(f"/api/v1/jobs/{reply.json()['job_id']}")
        assert gone.status_code == 200, gone.text
    assert live.proc.poll() is None, "the node is alive"


@SETTINGS
@given(sched=schedule, after=st.one_of(st.none(), instant), count=st.integers(-1, 1001))
def test_previewing_any_schedule_is_2xx_or_4xx_with_increasing_times(
    live, sched, after, count
) -> None:
    body: dict = {"schedule": sched, "count": count}
    if after is not None:
        body["after"] = after
    reply = live.http.post("/api/v1/schedules/preview", json=body)
    assert reply.status_code < 500, (body, reply.text)
    if reply.status_code == 200:
        times = [datetime.fromisoformat(t["at"]) for t in reply.json()["fire_times"]]
        assert all(a < b for a, b in itertools.pairwise(times)), (body, times)


@pytest.mark.slow
def test_the_properties_at_300_examples() -> None:
    """The same properties at 300 examples each (the default suite runs 50)."""
    env = {**os.environ, "SHARDSCHED_PROPERTY_EXAMPLES": "300", "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow",
            __file__,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
