"""One read of the event stream per poll interval for every live subscriber of a process.

Each Server-Sent Events stream of ``/api/v1/events/stream`` (a dashboard tab, a ``events
tail -f``) used to read every shard's events on its own four times a second, so ten open
tabs cost Redis ten times one. Here the first subscriber due to look reads once for all
(the others wait on its answer), and the events read are kept in a window that every
subscriber filters for itself. A subscriber whose position is older than the window
(``Last-Event-ID`` from long ago, ``since``) catches up with reads of its own first. Nothing
runs while nobody listens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import trio

from shardsched import ops
from shardsched.core.views import Event, EventList
from shardsched.ops.runs import events
from shardsched.ops.runs.events import Key

#: Events kept for the subscribers (a burst larger than this between two looks sends a
#: slow subscriber back to reads of its own).
WINDOW = 20_000
#: Events read per look at most (a page; a bigger backlog is read on the next look).
PAGE = 2_000


class EventHub:
    def __init__(
        self,
        dep: ops.Deployment,
        run: Callable[[ops.Op], Awaitable[object]],
        now_ms: Callable[[], Awaitable[int]],
        every_s: float,
    ) -> None:
        self.dep, self._run, self._now_ms, self.every_s = dep, run, now_ms, every_s
        self._kept: deque[tuple[Key, Event]] = deque(maxlen=WINDOW)
        self._floor: Key | None = None  #: every event after it and up to head is kept
        self._head: Key | None = None  #: read up to here
        self._looked_at = float("-inf")
        self._lock = trio.Lock()
        self.reads = 0  #: looks at Redis made (the tests count them)

    async def look(self) -> None:
        """Read what is new, unless someone did within the interval (then wait for it)."""
        async with self._lock:
            if trio.current_time() - self._looked_at < self.every_s:
                return
            if self._head is None:
                start = await self._now_ms()
                self._floor = self._head = Key(start, -1, 0, 0)
            head = self._head
            after, since = (head.text(), None) if head.shard >= 0 else (None, head.ms)
            page: EventList = await self._run(events.events_page(self.dep, PAGE, after, since))  # type: ignore[assignment]
            self.reads += 1
            self._looked_at = trio.current_time()
            for e in page.events:
                key = events.parse_cursor(e.cursor)
                assert key is not None
                if len(self._kept) == self._kept.maxlen:
                    self._floor = self._kept[0][0]
                self._kept.append((key, e))
            if page.next_cursor:
                self._head = events.parse_cursor(page.next_cursor)

    def after(self, pos: Key | None) -> list[Event] | None:
        """The kept events after ``pos`` (None: from the window's start); None when
        ``pos`` is older than the window (read on your own first)."""
        if pos is not None and (self._floor is None or pos < self._floor):
            return None
        if pos is None:
            return [e for _, e in self._kept]
        out = []
        for key, e in reversed(self._kept):
            if key <= pos:
                break
            out.append(e)
        out.reverse()
        return out

    def floor(self) -> Key | None:
        """Every event after it (up to what was read) is kept."""
        return self._floor
