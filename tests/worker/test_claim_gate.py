"""The completer gives way to a burst's claims (worker/claim_gate.py), for a bounded time,
and never to a DAG task's completion. Timed on trio's autojump clock: the waits are exact."""

from __future__ import annotations

import trio

from shardsched.core.models import ExecSpec
from shardsched.store.lua.runs import Delivery
from shardsched.worker.claim_gate import ClaimGate
from shardsched.worker.holdings import Claimed, Finished, Holdings
from shardsched.worker.runner import Outcome


async def waited(gate: ClaimGate) -> float:
    start = trio.current_time()
    await gate.give_way()
    return trio.current_time() - start


async def test_no_busy_claim_no_wait(autojump_clock: trio.abc.Clock) -> None:
    gate = ClaimGate(busy_claim=50, settle_s=0.05, hold_s=1.0)
    assert await waited(gate) == 0
    gate.claimed(49)  # small claims: the steady state
    assert await waited(gate) == 0


async def test_waits_until_claims_settle(autojump_clock: trio.abc.Clock) -> None:
    gate = ClaimGate(busy_claim=50, settle_s=0.05, hold_s=1.0)
    gate.claimed(500)
    assert abs(await waited(gate) - 0.05) < 1e-9


async def wait_while_claiming(gate: ClaimGate, claims: list[int]) -> float:
    """How long a completer that starts now gives way while a claim of each size in
    ``claims`` comes back, one every 20 ms."""
    result: list[float] = []

    async def completer() -> None:
        result.append(await waited(gate))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(completer)
        for count in claims:
            await trio.sleep(0.02)  # virtual time (autojump clock): claims 20 ms apart
            gate.claimed(count)
    return result[0]


async def test_busy_claims_hold_at_most_hold_s(autojump_clock: trio.abc.Clock) -> None:
    gate = ClaimGate(busy_claim=50, settle_s=0.05, hold_s=1.0)
    gate.claimed(1000)
    # a claim of 1000 every 20 ms for 2 s
    assert abs(await wait_while_claiming(gate, [1000] * 100) - 1.0) < 1e-9
    # the hold is per call: the next call may wait again, as long
    gate.claimed(1000)
    assert abs(await waited(gate) - 0.05) < 1e-9


async def test_settles_early_when_claims_get_small(autojump_clock: trio.abc.Clock) -> None:
    gate = ClaimGate(busy_claim=50, settle_s=0.05, hold_s=1.0)
    gate.claimed(1000)
    # the burst is claimed after 200 ms: what comes back then is small
    assert abs(await wait_while_claiming(gate, [1000] * 10 + [3] * 10) - (0.2 + 0.05)) < 1e-9


def finished(run_id: str) -> Finished:
    claimed = Claimed(0, Delivery("1-1", run_id, 1), ExecSpec("handler:noop"), 0, 1, 0, 0.0)
    return Finished(claimed, Outcome(0, None, b""), 0)


async def test_a_dag_task_finishing_hurries_the_completer(
    autojump_clock: trio.abc.Clock,
) -> None:
    holdings = Holdings()
    holdings.gate.claimed(1000)
    holdings.claim((job := finished("nightly:1700000000000:1")).claimed)
    holdings.finish(job)  # a job's run: it may wait
    assert abs(await waited(holdings.gate) - holdings.gate.settle_s) < 1e-9
    holdings.gate.claimed(1000)
    result: list[float] = []

    async def completer() -> None:
        result.append(await waited(holdings.gate))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(completer)
        await trio.sleep(0.01)  # virtual time (autojump clock): the gate waits 10 ms first
        holdings.gate.claimed(1000)
        holdings.claim((task := finished("dag_etl.load:1700000000000:1")).claimed)
        holdings.finish(task)  # releases downstream
    assert abs(result[0] - 0.01) < 1e-9
    # the hurry is used up by that call
    holdings.gate.claimed(1000)
    assert abs(await waited(holdings.gate) - holdings.gate.settle_s) < 1e-9
