"""Capped exponential backoff for the loops that retry Redis: errors are weather."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Backoff:
    """``next()`` gives the pause before the next try (doubling up to ``cap``); ``reset()``
    after a success."""

    first: float = 0.05
    cap: float = 2.0
    _delay: float = 0.0

    def next(self) -> float:
        self._delay = self.first if not self._delay else min(self._delay * 2, self.cap)
        return self._delay

    def reset(self) -> None:
        self._delay = 0.0
