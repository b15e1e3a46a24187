"""Concurrency limits with real worker processes, checked with what the jobs write
themselves: 200 runs of one key with limit 3 over 4 workers (16 slots) never run more
than 3 at once by their own start and end stamps, and all 200 finish, exactly once each;
a rate of 5 starts a second holds over 4 workers; both again on a 3-master Redis
Cluster, where the key's state lives in a slot of its own and the runs in others. The
audit agrees."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from conftest import wait_until
from redis_cluster import LocalCluster
from shardsched import ops
from shardsched.core.concurrency import LimitRequest, RateLimit
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops.deployment import concurrency
from shardsched.ops.history import audit
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import connect

pytestmark = [pytest.mark.processes, pytest.mark.slow]

RUNS = 200
LIMIT = 3


def stamps_command(path: Path) -> str:
    """A run's own record: its start and end, by the machine's clock, around its work."""
    return (
        f'echo "start $SHARDSCHED_RUN_ID $(date +%s%N)" >> {path}; sleep 0.1; '
        f'echo "end $SHARDSCHED_RUN_ID $(date +%s%N)" >> {path}'
    )


def read_stamps(path: Path) -> tuple[dict[str, int], dict[str, int], int]:
    """(starts by run, ends by run, the most runs between a start and an end at once)."""
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    events = []
    for line in path.read_text().splitlines():
        what, rid, ns = line.split()
        (starts if what == "start" else ends).setdefault(rid, int(ns))
        events.append((int(ns), what == "start"))
    running = peak = 0
    for _ns, is_start in sorted(events):  # an end before a start at the same instant
        running += 1 if is_start else -1
        peak = max(peak, running)
    return starts, ends, peak


async def two_hundred_under_a_limit(redis, dep, workers, tmp_path: Path, by_job: bool) -> None:
    stamps = tmp_path / "stamps"
    if not by_job:
        request = LimitRequest(limit=LIMIT)
        await drive_async(concurrency.set_limits(dep, "tenant:acme", request, "test"), redis)
    specs = [
        JobSpec(
            name=f"acme-{i}",
            schedule=OnceSchedule(at=from_ms(0)),
            command=stamps_command(stamps),
            concurrency_key="tenant:{labels.tenant}",
            concurrency_limit=LIMIT if by_job else None,
            labels={"tenant": "acme"},
        )
        for i in range(RUNS)
    ]
    for i in range(4):
        workers(f"w-limit-{i}")
    await drive_async(ops.create_jobs(dep, specs), redis)

    async def all_ended() -> bool:
        return stamps.exists() and stamps.read_text().count("end ") >= RUNS

    await wait_until(all_ended, timeout=180)
    await trio.sleep(0.5)  # a run executed twice would show now
    starts, ends, peak = read_stamps(stamps)
    assert len(starts) == RUNS and len(ends) == RUNS
    assert stamps.read_text().count("start ") == RUNS, "a run executed twice"
    assert peak == LIMIT, f"{peak} runs of the key at once (limit {LIMIT})"
    view = await drive_async(concurrency.get_key(dep, "tenant:acme"), redis)
    assert view.waiting == 0
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.duplicated == 0 and report.missing == 0, report
    assert report.executions.get("terminal", 0) >= RUNS, report.executions


async def test_two_hundred_runs_limit_three_over_four_workers(
    node, redis, dep, workers, tmp_path
) -> None:
    await two_hundred_under_a_limit(redis, dep, workers, tmp_path, by_job=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("ck-cluster"), replicas=0)
    c.start()
    yield c
    c.stop()


class TestOnACluster:
    @pytest.fixture
    def redis_server(self, cluster: LocalCluster) -> LocalCluster:
        return cluster

    @pytest.fixture
    async def redis(self, cluster: LocalCluster) -> AsyncIterator[object]:
        client = connect(cluster.url, size=4)
        yield client
        await client.aclose()

    async def test_two_hundred_runs_limit_three_on_a_cluster(
        self, nursery, cluster, redis, dep, workers, tmp_path
    ) -> None:
        node = ShardManager(redis, dep, node_id="ck-node", renew_every_s=0.5)
        await nursery.start(node.run)
        slots = {
            int(cluster.cli(cluster.ports[0], "CLUSTER", "KEYSLOT", key))
            for key in (dep.concurrency("tenant:acme").holders, dep.shard(0).timer)
        }
        assert len(slots) == 2
        await two_hundred_under_a_limit(redis, dep, workers, tmp_path, by_job=False)

    async def test_a_rate_limit_on_a_cluster(
        self, nursery, cluster, redis, dep, workers, tmp_path
    ) -> None:
        node = ShardManager(redis, dep, node_id="ck-rate-node", renew_every_s=0.5)
        await nursery.start(node.run)
        await thirty_under_a_rate(redis, dep, workers, tmp_path)


async def test_a_rate_limit_holds_across_worker_processes(
    node, redis, dep, workers, tmp_path
) -> None:
    await thirty_under_a_rate(redis, dep, workers, tmp_path)


async def thirty_under_a_rate(redis, dep, workers, tmp_path: Path) -> None:
    """At most 5 starts of the key in any second, 30 runs over 4 workers, by the runs' own
    start stamps, less 0.3 s for the spread of spawning a command after its grant: on a
    loaded 2-core box 0.1 s was exceeded twice (0.85 s and 0.899 s between starts 0 and 5
    in CI). A limit not held, or held at 7.5 a second, still spans less than 0.7 s."""
    stamps = tmp_path / "stamps"
    request = LimitRequest(rate=RateLimit(max=5, per_s=1.0))
    await drive_async(concurrency.set_limits(dep, "paced", request, "test"), redis)
    specs = [
        JobSpec(
            name=f"paced-{i}",
            schedule=OnceSchedule(at=from_ms(0)),
            command=stamps_command(stamps),
            concurrency_key="paced",
        )
        for i in range(30)
    ]
    for i in range(4):
        workers(f"w-rate-{i}")
    await drive_async(ops.create_jobs(dep, specs), redis)

    async def all_ended() -> bool:
        return stamps.exists() and stamps.read_text().count("end ") >= 30

    await wait_until(all_ended, timeout=60)
    starts, _ends, _peak = read_stamps(stamps)
    times = sorted(starts.values())
    assert len(times) == 30
    for i in range(5, len(times)):  # any 6 starts span the interval
        assert times[i] - times[i - 5] >= 0.7e9, [t - times[0] for t in times]
    assert times[-1] - times[0] < 12e9, "far slower than 5 a second"
