"""Stable jitter: spreading jobs that share a schedule over time, the same way every time.

25,000 jobs on ``0 * * * *`` all fall due on one second. Two ways to spread them, both
derived from the job's (or DAG's) id alone, so a job lands on the same offset across
restarts, nodes and versions, and a tick's run id stays keyed by its nominal time:

* ``H`` in a cron field, Jenkins' syntax: ``H`` (a value of the field's range), ``H(a-b)``
  (a value of a..b), ``H/n`` and ``H(a-b)/n`` (every n, from an offset below n). It is
  resolved once, when the job's timing is written: the job's stored timing holds the
  plain expression it stands for (its spec keeps the ``H``), so the scheduler's hot path
  never sees an ``H``.
* ``spread_s``: a per-job offset in [0, spread_s), added to every nominal tick. The timer
  holds the *planned* time (nominal + offset); run ids, skip records and the ledger hold
  the *nominal* tick, so the dedupe and the audit are unchanged. :func:`shifted` is the
  whole conversion.

The hash is BLAKE2b of the id (with the field's place for ``H``): stable by definition,
unlike Python's ``hash``.
"""

from __future__ import annotations

import hashlib
import re

#: Each cron field's range for H: (lowest, highest). Day-of-month stops at 28, as in
#: Jenkins, so an H day exists in every month.
H_RANGES = ((0, 59), (0, 23), (1, 28), (1, 12), (0, 6))
_H = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$(?!\n)")


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


#: A term of a field that starts with ``H`` (no day or month name does): ``H``, ``H(a-b)``,
#: ``H/n``, or a malformed one; never the H inside ``THU``.
_H_TERM = re.compile(r"(?:^|[\s,])H")


def has_h(expression: str) -> bool:
    """Whether a cron expression has an H term (a day name such as ``THU`` is none)."""
    return _H_TERM.search(expression) is not None


def resolve_h(expression: str, member_id: str) -> str:
    """The plain cron expression ``expression``'s H fields stand for, for this job.
    Raises ValueError for an H form out of its field's range (the rest is croniter's to
    check)."""
    fields = expression.split()
    if len(fields) != 5:
        return expression  # not ours to judge: parse_cron says what is wrong
    out = []
    for place, field in enumerate(fields):
        out.append(",".join(_resolve(part, place, member_id) for part in field.split(",")))
    return " ".join(out)


def _resolve(part: str, place: int, member_id: str) -> str:
    if not part.startswith("H"):
        return part  # no H term (THU, a name, a number, *)
    m = _H.match(part)
    if m is None:
        raise ValueError(f"{part!r}: H is H, H(a-b), H/n or H(a-b)/n")
    lo, hi = H_RANGES[place]
    if m.group(1) is not None:
        a, b = int(m.group(1)), int(m.group(2))
        if not lo <= a <= b <= hi:
            raise ValueError(f"{part!r}: the range must lie within {lo}-{hi}")
        lo, hi = a, b
    h = _hash(f"{member_id}:{place}")
    if m.group(3) is None:
        return str(lo + h % (hi - lo + 1))
    step = int(m.group(3))
    if not 1 <= step <= hi - lo + 1:
        raise ValueError(f"{part!r}: the step must be 1-{hi - lo + 1}")
    return f"{lo + h % step}-{hi}/{step}"


def h_choices(part: str, place: int) -> list[str]:
    """Every term an H term of a field can stand for, whatever the job (a plain term: it
    alone). The month's H is the one whose value can make an expression never fire
    (``0 0 31 H *`` for a job whose H is February): validation tries each."""
    m = _H.match(part)
    if m is None:
        return [part]
    lo, hi = H_RANGES[place]
    if m.group(1) is not None:
        lo, hi = int(m.group(1)), int(m.group(2))
    if m.group(3) is None:
        return [str(v) for v in range(lo, hi + 1)]
    step = int(m.group(3))
    return [f"{lo + k}-{hi}/{step}" for k in range(min(step, hi - lo + 1))]


def offset_ms(member_id: str, spread_s: float) -> int:
    """The job's offset in [0, spread_s) in whole milliseconds (0 without a spread)."""
    spread_ms = round(spread_s * 1000)
    return _hash(member_id) % spread_ms if spread_ms > 0 else 0


def shifted(planned_ms: int, offset: int) -> int:
    """A planned time (a timer score) as its nominal tick."""
    return planned_ms - offset
