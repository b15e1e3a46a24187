"""Claims before completions while a burst is being claimed.

Redis runs one script at a time. At a minute boundary a worker's claims come back full
(runs are waiting on the streams) while its first runs already finish; a completion sent
then queues in Redis in front of the next claim, so every run not yet claimed starts later.
The completer therefore gives way: it holds its next batch while claims keep coming back
big, for at most ``hold_s``, then sends everything queued. A run a completion would release
(a DAG task's downstream) cannot wait behind the gate, so finishing one hurries it.

Nothing is lost by waiting: a finished run's lease is kept by the renewer until its
completion is applied (Holdings.unacknowledged)."""

from __future__ import annotations

import math

import trio

#: A claim of at least this many runs means a burst is being claimed.
BUSY_CLAIM = 50
#: How long after the last busy claim the completer still gives way.
SETTLE_S = 0.05
#: The longest a completion waits behind claims.
HOLD_S = 1.0


class ClaimGate:
    """Told of each claim by the claim loop; waited on by the completer."""

    def __init__(
        self, busy_claim: int = BUSY_CLAIM, settle_s: float = SETTLE_S, hold_s: float = HOLD_S
    ) -> None:
        self.busy_claim = busy_claim
        self.settle_s = settle_s
        self.hold_s = hold_s
        self._last_busy = -math.inf  #: trio's clock when a busy claim came back
        self._urgent = False
        self._changed = trio.Event()

    def claimed(self, count: int) -> None:
        """A claim came back with ``count`` runs."""
        if count >= self.busy_claim:
            self._last_busy = trio.current_time()
        self._changed.set()

    def hurry(self) -> None:
        """Something finished whose completion others wait for: stop giving way."""
        self._urgent = True
        self._changed.set()

    async def give_way(self) -> None:
        """Return once claims have been small for ``settle_s``, on a hurry, or after
        ``hold_s``."""
        deadline = trio.current_time() + self.hold_s
        while not self._urgent:
            quiet_at = self._last_busy + self.settle_s
            if trio.current_time() >= min(quiet_at, deadline):
                break
            self._changed = trio.Event()
            with trio.move_on_at(min(quiet_at, deadline)):
                await self._changed.wait()
        self._urgent = False
