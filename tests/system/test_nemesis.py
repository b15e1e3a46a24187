"""The nemesis's short form (issue #53; ``shardsched bench faults --nemesis`` is the
long one): a primary with two replicas behind three sentinels, in network namespaces of
their own, cut off from its replicas and sentinels (the split brain) and killed -9 while
two nodes and two workers run interval and minute jobs. In the durable mode, waiting for
both replicas (either may be promoted: waiting for one of two loses what only the other
had, and the cut reaches one replica a moment before the other), the jobs' own record
shows every owed tick run, none under two run ids, and no run executed twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardsched.bench import ha_net
from shardsched.bench.nemesis import run_nemesis, schedule


def test_a_schedule_is_the_same_for_the_same_seed() -> None:
    a, b = schedule(5, 600), schedule(5, 600)
    assert [(e.at_s, e.kind, e.target) for e in a] == [(e.at_s, e.kind, e.target) for e in b]
    assert [(e.at_s, e.kind) for e in a] != [(e.at_s, e.kind) for e in schedule(6, 600)]
    assert len({e.kind for e in schedule(1, 3600)}) >= 8  # a long run mixes every kind


@pytest.mark.slow  # about two minutes: CI's serial step
@pytest.mark.serial  # holds failovers to a deadline: alone
@pytest.mark.processes
@pytest.mark.skipif(not ha_net.available(), reason="needs root and `ip netns`")
def test_the_durable_mode_through_a_split_brain_and_a_kill(tmp_path: Path) -> None:
    verdict = run_nemesis(
        seed=3, seconds=80, durable=2, interval_jobs=40, minute_jobs=400,
        kinds=("primary-partition", "primary-kill-9"), root=tmp_path,
    )  # fmt: skip
    print(verdict.table())
    assert len(verdict.events) >= 2 and verdict.expected > 2000, verdict.table()
    assert verdict.ok, verdict.table()
    assert verdict.second_executions == 0, verdict.table()
