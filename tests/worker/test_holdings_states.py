"""A worker's deliveries as a state machine (worker/holdings.py), driven by hypothesis in
random orders: claims, starts, inline finishes, executions ending with or without an
outcome, lease losses, drains, completion batches taken, sent again and settled. After
every step each delivery is in exactly one state and every view agrees with a model of
what the worker did; every illegal move raises."""

from __future__ import annotations

import pytest
import trio
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    precondition,
    rule,
)

from shardsched.core.models import ExecSpec
from shardsched.store.lua.runs import Delivery
from shardsched.worker.holdings import Claimed, Finished, Holdings, IllegalTransition, State
from shardsched.worker.runner import Outcome

OK = Outcome(0, None, b"")


def claimed(n: int) -> Claimed:
    run_id = f"job_{n:04d}:1700000000000:1"
    return Claimed(n % 4, Delivery(f"{n}-0", run_id, n), ExecSpec("true"), 0, 1, 0, 0.0)


class Deliveries(RuleBasedStateMachine):
    """The model: each key's state as the worker's calls imply it, the completion queue's
    order, and what is on its way."""

    def __init__(self) -> None:
        super().__init__()
        self.h = Holdings()
        self.model: dict[tuple[str, int], State] = {}
        self.queue: list[tuple[str, int]] = []
        self.settled: set[str] = set()  #: runs whose completion was applied
        self.next_n = 0

    def keys_in(self, *states: State) -> list[tuple[str, int]]:
        return sorted(k for k, s in self.model.items() if s in states)

    @rule()
    def claim(self) -> None:
        c = claimed(self.next_n)
        self.next_n += 1
        self.h.claim(c)
        self.model[c.key] = State.CLAIMED
        with pytest.raises(IllegalTransition):
            self.h.claim(c)  # a delivery is claimed once

    @precondition(lambda self: self.keys_in(State.CLAIMED))
    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(self.keys_in(State.CLAIMED)))
        live = self.h.start(key, trio.CancelScope())
        assert live.total == 0
        self.model[key] = State.RUNNING

    @precondition(lambda self: self.keys_in(State.CLAIMED, State.RUNNING))
    @rule(data=st.data())
    def finish(self, data: st.DataObject) -> None:
        """An inline handler's outcome (CLAIMED), or an execution ending with one."""
        key = data.draw(st.sampled_from(self.keys_in(State.CLAIMED, State.RUNNING)))
        n = int(key[0][4:8])
        self.h.finish(Finished(claimed(n), OK, 0))
        self.model[key] = State.FINISHED
        self.queue.append(key)

    @precondition(lambda self: self.keys_in(State.RUNNING, State.LOST))
    @rule(data=st.data())
    def stopped(self, data: st.DataObject) -> None:
        """An execution ended with nothing to report: cancelled, or its lease lost."""
        key = data.draw(st.sampled_from(self.keys_in(State.RUNNING, State.LOST)))
        assert self.h.stopped(key) == (self.model[key] is State.LOST)
        del self.model[key]

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def lose(self, data: st.DataObject) -> None:
        """A renewal answered "not yours": only a running delivery changes."""
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.h.lose(key)
        if self.model[key] is State.RUNNING:
            self.model[key] = State.LOST

    @rule()
    def drain(self) -> None:
        """A draining worker gives up everything still running."""
        for held in self.h.running():
            self.h.lose(held.claimed.key)
        for key in self.keys_in(State.RUNNING):
            self.model[key] = State.LOST

    @rule(target=(batches := Bundle("batches")), count=st.integers(1, 5))
    def take(self, count: int) -> list[tuple[str, int]]:
        batch = [f.claimed.key for f in self.h.take(count)]
        assert batch == self.queue[:count]
        del self.queue[:count]
        for key in batch:
            self.model[key] = State.COMPLETING
        return batch

    @rule(batch=consumes(batches), data=st.data())
    def reply(self, batch: list[tuple[str, int]], data: st.DataObject) -> None:
        """Redis answered a batch: some settled (applied or refused), the rest sent again
        (the connection went, or an error reply)."""
        batch = [k for k in batch if self.model.get(k) is State.COMPLETING]
        again = data.draw(st.lists(st.sampled_from(batch), unique=True) if batch else st.just([]))
        for key in batch:
            if key not in again:
                self.h.settle(key)
                del self.model[key]
                self.settled.add(key[0])
        self.h.again([Finished(claimed(int(k[0][4:8])), OK, 0) for k in again])
        for key in again:
            self.model[key] = State.FINISHED
        self.queue[:0] = again

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def illegal(self, data: st.DataObject) -> None:
        """Every move a state does not allow raises, and changes nothing."""
        key = data.draw(st.sampled_from(sorted(self.model)))
        state = self.model[key]
        n = int(key[0][4:8])
        moves = {
            "start": lambda: self.h.start(key, trio.CancelScope()),
            "finish": lambda: self.h.finish(Finished(claimed(n), OK, 0)),
            "stopped": lambda: self.h.stopped(key),
            "settle": lambda: self.h.settle(key),
            "again": lambda: self.h.again([Finished(claimed(n), OK, 0)]),
        }
        allowed = {
            State.CLAIMED: {"start", "finish"},
            State.RUNNING: {"finish", "stopped"},
            State.LOST: {"stopped"},
            State.FINISHED: set(),
            State.COMPLETING: {"settle", "again"},
        }[state]
        name = data.draw(st.sampled_from(sorted(set(moves) - allowed)))
        with pytest.raises(IllegalTransition):
            moves[name]()
        assert self.h.state(key) is state

    @invariant()
    def every_view_agrees_with_the_model(self) -> None:
        h = self.h
        assert {k: h.state(k) for k in self.model} == self.model
        # held, or settled lately: a take-up answered late must not start one again
        assert h.run_ids() == {k[0] for k in self.model} | self.settled
        running = self.keys_in(State.RUNNING)
        assert sorted(x.claimed.key for x in h.running()) == running
        assert h.running_count == len(running)
        assert h.queued == len(self.queue)
        kept = self.keys_in(State.RUNNING, State.FINISHED, State.COMPLETING)
        assert sorted(c.key for c in h.leased()) == kept


Deliveries.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_deliveries = Deliveries.TestCase
