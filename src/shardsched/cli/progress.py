"""A progress bar for the CLI's long operations (apply, a bulk ``jobs add``, a backfill
being waited for), drawn with rich on a terminal only: into a pipe or a file nothing is
drawn, so scripts read exactly the output they read before. rich is the optional ``cli``
extra; without it there is no bar, and nothing else changes."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
#: Fewer items than this finish before a bar is worth drawing.
AT_LEAST = 20


def _console() -> Any | None:
    if not sys.stderr.isatty():
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(stderr=True)


def track(items: list[T], what: str) -> Iterable[T]:
    """``items``, drawing a bar on stderr as they are consumed (a terminal, 20 or more)."""
    console = _console() if len(items) >= AT_LEAST else None
    if console is None:
        return items
    from rich.progress import track as rich_track

    return rich_track(items, description=what, console=console, transient=True)


class Bar:
    """A bar moved by hand: ``update(done, total)``."""

    def __init__(self, progress: Any | None, task: Any | None, what: str = "") -> None:
        self._progress, self._task, self._what = progress, task, what

    def update(self, done: int, total: int | None) -> None:
        """``total`` None: not known yet (the bar pulses, its label counts)."""
        if self._progress is None:
            return
        label = self._what if total is not None else f"{self._what} {done:,}"
        self._progress.update(self._task, completed=done, total=total, description=label)


@contextmanager
def bar(what: str) -> Iterator[Bar]:
    console = _console()
    if console is None:
        yield Bar(None, None)
        return
    from rich.progress import Progress

    with Progress(console=console, transient=True) as progress:
        yield Bar(progress, progress.add_task(what, total=None), what)
