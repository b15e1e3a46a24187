"""What a worker holds: each delivery from its claim until Redis applied (or refused) its
completion. One object, owned by the worker and read by its renewer and completer, so
"is this run still ours?" has one answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import msgspec
import trio

from shardsched.core.ids import dag_run_of
from shardsched.core.models import ExecSpec
from shardsched.store.lua.runs import ClaimedEntry, Delivery
from shardsched.worker.claim_gate import ClaimGate
from shardsched.worker.runner import LiveOutput, Outcome

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

    @classmethod
    def of(cls, shard: int, entry: ClaimedEntry, local: float) -> Claimed:
        return cls(  # positional, in field order
            shard,
            Delivery(entry.entry_id, entry.run_id, entry.token),
            decode_spec(entry.spec_json),
            entry.scheduled_ms,
            entry.attempt,
            entry.now_ms,
            local,
        )

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


class Holdings:
    """The deliveries a worker holds: running, and finished awaiting their completion."""

    def __init__(self) -> None:
        self.running: dict[tuple[str, int], tuple[Claimed, trio.CancelScope]] = {}
        #: the output of each running command so far (worker/live_output.py flushes it)
        self.live: dict[tuple[str, int], LiveOutput] = {}
        #: every delivery held, from its claim until its completion is applied or refused:
        #: a take-up after a reconnect must not start any of them again
        self.held: set[tuple[str, int]] = set()
        self.lost: set[tuple[str, int]] = set()  #: runs whose lease went elsewhere
        self.finished: list[Finished] = []  #: queued for completion
        self.completing: list[Finished] = []  #: the batch whose completion is in flight
        self.finished_added = trio.Event()
        self._waiting: list[trio.Event] = []  #: tasks waiting for something to run
        self.gate = ClaimGate()  #: the completer gives way to a burst's claims

    def start(self, key: tuple[str, int], claimed: Claimed, scope: trio.CancelScope) -> None:
        """A run starts executing here."""
        self.running[key] = (claimed, scope)
        if self._waiting:
            for event in self._waiting:
                event.set()
            self._waiting = []

    async def wait_running(self) -> None:
        """Return once something runs (at once if something does): an idle worker's
        periodic chores sleep here instead of waking a thousand workers every second."""
        while not self.running:
            event = trio.Event()
            self._waiting.append(event)
            await event.wait()

    def finish(self, f: Finished) -> None:
        self.finished.append(f)
        if "." in f.claimed.run_id and dag_run_of(f.claimed.run_id):
            self.gate.hurry()  # its completion releases the DAG's next tasks
        self.finished_added.set()

    def unacknowledged(self) -> list[Claimed]:
        """Finished runs whose completion is queued or on its way: their leases still count."""
        return [f.claimed for f in (*self.completing, *self.finished)]

    def leased(self) -> list[Claimed]:
        """Every delivery whose lease must be kept: running or not yet acknowledged."""
        return [c for c, _ in self.running.values()] + self.unacknowledged()

    def lose(self, key: tuple[str, int]) -> None:
        """The lease went elsewhere (or the run was cancelled): stop it, report nothing."""
        if key in self.running:
            self.lost.add(key)
            self.running[key][1].cancel()
