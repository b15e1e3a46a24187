"""The short form of ``shardsched bench events``: a chain of three jobs and a hook fed
600 signed events (5 % sent twice) through a node kill -9, a worker kill -9 and a Redis
kill -9 and restart, judged by the jobs' own record: every event one outcome, every key
one run that ran, every link once per upstream success, the audit clean. (A dedupe key
made of the event id instead of its key was checked to fail it: 15 keys doubled of 300.)"""

from __future__ import annotations

import pytest

from shardsched.bench.events import run_bench

pytestmark = pytest.mark.slow


def test_events_and_a_chain_through_faults() -> None:
    result = run_bench(events=600, dups=0.05, senders=8, seed=7, faults=True)
    assert [what for _at, what in result["faulted"]["faults_at_s"]] == ["node", "worker", "redis"]
    assert result["faulted"]["retries"] > 0  # the faults were felt by the senders
    assert result["lost"] == 0 and result["doubled"] == 0 and result["never_executed"] == 0
    assert result["event_outcomes"].get("none", 0) == 0
    assert result["event_outcomes"]["deduplicated"] >= 30  # the 5 % sent twice, at least
    assert result["keys_acked"] == 600 + 200 and result["fed_runs"] == 800
    for link in result["chain"].values():
        assert link["upstream_successes"] > 0
        assert link["missing"] == link["doubled"] == link["unexpected"] == 0, link
    assert result["audit"]["ok"] and result["audit"]["events"]["unsettled"] == 0
    assert result["exits"] == {} and result["ok"]
