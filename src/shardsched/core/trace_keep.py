"""Which unsampled runs keep their trace anyway: a run's spans are noted cheaply while it
runs and exported when its firing was sampled **or** when it ends in a way an operator
will come asking about (a trace sampler decides at the start; only the end knows).

Kept, each reason on by default (``SHARDSCHED_TRACES_KEEP`` names the ones wanted, or
``none``):

- ``failed``: the attempt ended failed, timed out, dead-lettered, lost or cancelled (not
  succeeded); a firing, DAG run or poison run that ended failed or cancelled keeps its root
- ``retried``: an attempt after the first (the one before it failed, so its trace was kept)
- ``redelivered``: a delivery after the first (a lease lapsed: a worker died or stalled),
  or a run its worker took up again after its process died (the same worker id)
- ``late``: started more than ``SHARDSCHED_TRACES_LATE_MS`` after its scheduled time
  (default 60,000; 0: never late)
- ``slow``: executed for more than ``SHARDSCHED_TRACES_SLOW_MS`` (default 300,000; 0: never)

Pure: no OpenTelemetry, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

REASONS = ("failed", "retried", "redelivered", "late", "slow")


class KeepRule(msgspec.Struct, frozen=True):
    """What an unsampled run's end must be for its trace to be exported."""

    reasons: frozenset[str] = frozenset(REASONS)
    late_ms: int = 60_000
    slow_ms: int = 300_000

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> KeepRule:
        """The rule the ``SHARDSCHED_TRACES_*`` variables ask for (unset: the default);
        ValueError names a bad one. Strict: a variable set to nothing, an empty item in
        the list or a number in any other writing than plain ASCII digits is refused."""
        words = env.get("SHARDSCHED_TRACES_KEEP")
        reasons = frozenset(REASONS) if words is None else _reasons(words)
        return cls(
            reasons,
            _ms(env, "SHARDSCHED_TRACES_LATE_MS", 60_000),
            _ms(env, "SHARDSCHED_TRACES_SLOW_MS", 300_000),
        )

    def kept_for(
        self,
        state: str,
        attempt: int,
        delivery: int,
        started_late_ms: int,
        executed_ms: int,
        again: bool = False,
    ) -> str | None:
        """Why an unsampled attempt that ended in ``state`` keeps its trace (the first
        reason that holds), or None: it is dropped. ``again``: executed again by the
        same worker id after its process died (taken up): a redelivery too."""
        reasons = self.reasons
        if "failed" in reasons and state != "succeeded":
            return "failed"
        if "retried" in reasons and attempt > 1:
            return "retried"
        if "redelivered" in reasons and (again or delivery != 1):  # 0: the 1000th…
            return "redelivered"
        if "late" in reasons and self.late_ms and started_late_ms > self.late_ms:
            return "late"
        if "slow" in reasons and self.slow_ms and executed_ms > self.slow_ms:
            return "slow"
        return None

    def keeps_ended(self, state: str) -> bool:
        """Whether a firing that ended in ``state`` with no worker's completion (a DAG run,
        a poison run, a cancelled one) keeps its root span unsampled."""
        return "failed" in self.reasons and state in ("failed", "dead_letter", "cancelled")


def _reasons(words: str) -> frozenset[str]:
    """The reasons of a ``SHARDSCHED_TRACES_KEEP`` value: ``none``, or known reasons
    separated by commas."""
    name = "SHARDSCHED_TRACES_KEEP"
    known = f"known: {', '.join(REASONS)}, or none alone"
    asked = [w.strip().lower() for w in words.split(",")]
    if asked == ["none"]:
        return frozenset()
    if "" in asked:
        said = "is empty" if not words.strip() else f"has an empty item in {words!r}"
        raise ValueError(f"{name} {said} ({known}; unset it for the default)")
    if "none" in asked:
        raise ValueError(f"{name}: none keeps nothing and goes alone, not with {words!r}")
    unknown = [w for w in asked if w not in REASONS]
    if unknown:
        raise ValueError(f"{name}: unknown {', '.join(map(repr, unknown))} ({known})")
    return frozenset(asked)


#: the longest threshold taken: a year
MAX_MS = 366 * 86_400_000


def _ms(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None:
        return default
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        raise ValueError(
            f"{name}: {raw!r} is not a whole number of milliseconds"
            " (digits 0-9 only; 0 turns it off; unset it for the default)"
        )
    value = int(text)
    if value > MAX_MS:
        raise ValueError(f"{name}: {value} is more than a year ({MAX_MS} ms)")
    return value
