"""What a worker notes of a run's spans while it runs (worker/spans.py makes them, if the
run is kept): plain numbers on its Claimed, no OpenTelemetry object."""

from __future__ import annotations

from typing import Any

#: (name, start ms, end ms, error or None, the span's own attributes or None)
Noted = tuple[str, int, int, str | None, dict[str, Any] | None]


class Notes:
    """A delivery's spans so far, as numbers: (name, start ms, end ms, error, attributes)
    each, with its trace id and whether its firing was sampled, decided at its claim, and
    whether Redis said it was cancelled while it ran, and whether it is executed again
    (taken up after its process died)."""

    __slots__ = ("again", "cancelled", "sampled", "spans", "trace")

    def __init__(self, trace: int, sampled: bool, again: bool = False) -> None:
        self.trace = trace
        self.sampled = sampled
        self.spans: list[Noted] = []
        self.cancelled = False
        self.again = again
