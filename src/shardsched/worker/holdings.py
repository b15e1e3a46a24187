"""What a worker holds: each delivery, from its claim until Redis applied (or refused) its
completion, as one record in one explicit state. One object, owned by the worker and
read by its renewer, flusher and completer, so "is this run still ours?" has one answer,
and every change of state is a method here that checks it is a legal one::

    claim ─► CLAIMED ─start─► RUNNING ─finish─► FINISHED ─take─► COMPLETING ─settle─► (gone)
                │                │  ▲ lose                ▲           │
                │                ▼  │                     └─ again ───┘
                │              LOST ─stopped─► (gone)
                └─finish (an inline handler) ─► FINISHED
    RUNNING ─stopped (no outcome: cancelled) ─► (gone)
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import msgspec
import trio

from shardsched.core.ids import dag_run_of
from shardsched.core.models import ExecSpec
from shardsched.store.lua.runs import ClaimedEntry, Delivery
from shardsched.worker.claim_gate import ClaimGate
from shardsched.worker.runner import LiveOutput, Outcome

if TYPE_CHECKING:
    from shardsched.worker.trace_notes import Notes

_spec_decoder = msgspec.json.Decoder(ExecSpec)


def decode_spec(raw: bytes) -> ExecSpec | None:
    """The part of a stored spec a worker runs; None when it is gone or unreadable."""
    try:
        return _spec_decoder.decode(raw) if raw else None
    except msgspec.DecodeError:
        return None


class Claimed(NamedTuple):
    """A run this worker claimed, with the clocks to carry the server's time forward (a
    NamedTuple: one per run, cheap to build)."""

    shard: int
    delivery: Delivery
    spec: ExecSpec | None  #: None when the job's definition is gone or unreadable
    scheduled_for_ms: int
    attempt: int
    claimed_ms: int  #: the server's clock at the claim
    claimed_local: float  #: trio's clock at the claim
    run_args: bytes = b""  #: the run's own args JSON (a trigger's, a DAG run's); b"": none
    claim_took_ms: int = 0  #: how long the claim call took (known when tracing is on)
    #: this delivery's spans noted so far, made only if the run is kept (worker/spans.py);
    #: None when tracing is off
    trace: Notes | None = None

    @classmethod
    def of(
        cls,
        shard: int,
        entry: ClaimedEntry,
        local: float,
        claim_took_ms: int = 0,
        trace: Notes | None = None,
    ) -> Claimed:
        return cls(  # positional, in field order
            shard,
            Delivery(entry.entry_id, entry.run_id, entry.token),
            decode_spec(entry.spec_json),
            entry.scheduled_ms,
            entry.attempt,
            entry.now_ms,
            local,
            entry.args_json,
            claim_took_ms,
            trace,
        )

    @property
    def args_json(self) -> bytes:
        """The args the run gets, as JSON: its own, else its job's, else ``{}``."""
        if self.run_args:
            return self.run_args
        return bytes(self.spec.args) if self.spec is not None else b"{}"

    @property
    def run_id(self) -> str:
        return self.delivery.run_id

    @property
    def key(self) -> tuple[str, int]:
        """The same run may come back: (run id, delivery token) names this delivery."""
        return (self.delivery.run_id, self.delivery.token)

    def server_ms(self) -> int:
        """The server's clock now, carried forward from the claim by trio's clock."""
        return self.claimed_ms + round((trio.current_time() - self.claimed_local) * 1000)


@dataclass(frozen=True, slots=True)
class Finished:
    claimed: Claimed
    outcome: Outcome
    started_ms: int  #: execution start on the server's clock (estimated from the claim)
    inline: bool = False  #: an inline handler's run (worker/handlers.py)


class State(enum.Enum):
    CLAIMED = "claimed"  #: held, not started yet
    RUNNING = "running"  #: executing here (a cancel scope, live output)
    LOST = "lost"  #: its lease went elsewhere while it ran: being stopped, reports nothing
    FINISHED = "finished"  #: its outcome is queued for completion
    COMPLETING = "completing"  #: its completion is on its way to Redis


#: Every legal change of state (a delivery leaves the holdings from RUNNING, LOST and
#: COMPLETING: ``stopped`` and ``settle``).
TRANSITIONS: dict[State, frozenset[State]] = {
    State.CLAIMED: frozenset({State.RUNNING, State.FINISHED}),
    State.RUNNING: frozenset({State.FINISHED, State.LOST}),
    State.LOST: frozenset(),
    State.FINISHED: frozenset({State.COMPLETING}),
    State.COMPLETING: frozenset({State.FINISHED}),
}


class IllegalTransition(RuntimeError):
    """A delivery was asked to change state in a way the worker never should: a bug."""


@dataclass(slots=True)
class Held:
    """One delivery this worker holds."""

    claimed: Claimed
    state: State = State.CLAIMED
    scope: trio.CancelScope | None = None  #: while RUNNING (or LOST: being stopped)
    live: LiveOutput | None = None  #: while RUNNING: its output so far
    finished: Finished | None = None  #: from FINISHED on


Key = tuple[str, int]
#: How many settled runs a worker remembers (take-up reads answered late: the durable
#: mode's WAIT can hold one for its timeout, while a batch of completions lands)
SETTLED_KEPT = 50_000


class Holdings:
    """The deliveries a worker holds, each in one :class:`State`. Only the methods here
    change them; the rest of worker/ reads through the views."""

    def __init__(self) -> None:
        self._held: dict[Key, Held] = {}
        self._queue: list[Held] = []  #: FINISHED, oldest first: what the completer sends
        self._running = 0
        self.finished_added = trio.Event()
        self._waiting: list[trio.Event] = []  #: tasks waiting for something to run
        self.gate = ClaimGate()  #: the completer gives way to a burst's claims
        #: told of each delivery that leaves (settled or stopped): its concurrency hold
        #: goes back (worker/limits.py)
        self.on_leave: Callable[[Claimed], None] = lambda claimed: None
        #: runs whose completion Redis applied lately (bounded): a take-up whose read of
        #: the pending runs was answered after one of them settled must not run it again
        self._settled: deque[str] = deque(maxlen=SETTLED_KEPT)
        self._settled_set: set[str] = set()

    # -- transitions ----------------------------------------------------------------

    def _move(self, held: Held, to: State) -> None:
        if to not in TRANSITIONS[held.state]:
            raise IllegalTransition(f"{held.claimed.run_id}: {held.state.value} -> {to.value}")
        self._running += (to is State.RUNNING) - (held.state is State.RUNNING)
        held.state = to

    def _get(self, key: Key, *states: State) -> Held:
        held = self._held.get(key)
        if held is None or held.state not in states:
            was = "not held" if held is None else held.state.value
            raise IllegalTransition(f"{key[0]}: {was}, wanted {'/'.join(s.value for s in states)}")
        return held

    def claim(self, claimed: Claimed) -> None:
        """A delivery is ours (a claim, or a take-up after a reconnect)."""
        if claimed.key in self._held:
            raise IllegalTransition(f"{claimed.run_id}: claimed twice")
        self._held[claimed.key] = Held(claimed)

    def start(self, key: Key, scope: trio.CancelScope) -> LiveOutput:
        """It starts executing here; returns where its output goes."""
        held = self._get(key, State.CLAIMED)
        self._move(held, State.RUNNING)
        held.scope, held.live = scope, LiveOutput(bytearray())
        if self._waiting:
            for event in self._waiting:
                event.set()
            self._waiting = []
        return held.live

    def finish(self, f: Finished) -> None:
        """Its outcome is known: queued for completion."""
        held = self._get(f.claimed.key, State.CLAIMED, State.RUNNING)
        self._move(held, State.FINISHED)
        held.scope, held.live, held.finished = None, None, f
        self._queue.append(held)
        if "." in f.claimed.run_id and dag_run_of(f.claimed.run_id):
            self.gate.hurry()  # its completion releases the DAG's next tasks
        self.finished_added.set()

    def lose(self, key: Key) -> None:
        """The lease went elsewhere (or the run was cancelled): a running one is stopped
        and reports nothing. One not running needs nothing: its completion is refused."""
        held = self._held.get(key)
        if held is not None and held.state is State.RUNNING:
            self._move(held, State.LOST)
            assert held.scope is not None
            held.scope.cancel()

    def cancel(self, key: Key) -> None:
        """The run was cancelled: a running command is stopped as a timeout would be
        (SIGTERM, its grace, SIGKILL: worker/runner.py), a handler at once; it reports
        nothing (its completion would be refused)."""
        held = self._held.get(key)
        if held is not None and held.state is State.RUNNING:
            self._move(held, State.LOST)
            assert held.scope is not None and held.live is not None
            if held.live.graceful:
                held.live.request_stop()
            else:
                held.scope.cancel()

    def stopped(self, key: Key) -> bool:
        """Its execution ended without an outcome to report (lost, or cancelled): it
        leaves. Whether it had been lost."""
        held = self._get(key, State.RUNNING, State.LOST)
        self._running -= held.state is State.RUNNING
        del self._held[key]
        self.on_leave(held.claimed)
        return held.state is State.LOST

    def take(self, count: int) -> list[Finished]:
        """Up to ``count`` of the oldest queued outcomes, now on their way."""
        batch, self._queue = self._queue[:count], self._queue[count:]
        for held in batch:
            self._move(held, State.COMPLETING)
        return [held.finished for held in batch if held.finished is not None]

    def again(self, batch: Iterable[Finished]) -> None:
        """These completions did not reach Redis: back to the front of the queue."""
        helds = [self._get(f.claimed.key, State.COMPLETING) for f in batch]
        for held in helds:
            self._move(held, State.FINISHED)
        self._queue[:0] = helds
        if helds:
            self.finished_added.set()

    def settle(self, key: Key) -> None:
        """Redis applied its completion, or refused it as stale: it leaves (remembered
        among the lately settled)."""
        held = self._get(key, State.COMPLETING)
        del self._held[key]
        if len(self._settled) == SETTLED_KEPT:
            self._settled_set.discard(self._settled[0])
        self._settled.append(key[0])
        self._settled_set.add(key[0])
        self.on_leave(held.claimed)

    # -- views ----------------------------------------------------------------------

    def state(self, key: Key) -> State | None:
        held = self._held.get(key)
        return None if held is None else held.state

    @property
    def running_count(self) -> int:
        return self._running

    @property
    def queued(self) -> int:
        """Outcomes waiting for their completion to be sent."""
        return len(self._queue)

    def running(self) -> list[Held]:
        return [h for h in self._held.values() if h.state is State.RUNNING]

    def run_ids(self) -> set[str]:
        """Every run held, whatever its state, and every run settled lately: a take-up
        must not start one again."""
        return {run_id for run_id, _ in self._held} | self._settled_set

    def leased(self) -> list[Claimed]:
        """Every delivery whose lease must be kept: running, or finished and its
        completion not yet acknowledged (the owner would deliver it again)."""
        keep = (State.RUNNING, State.FINISHED, State.COMPLETING)
        return [h.claimed for h in self._held.values() if h.state in keep]

    async def wait_running(self) -> None:
        """Return once something runs (at once if something does): an idle worker's
        periodic chores sleep here instead of waking a thousand workers every second."""
        while not self._running:
            event = trio.Event()
            self._waiting.append(event)
            await event.wait()
