"""Instants as integer milliseconds since the epoch, the unit of every stored time.

Times in Redis and in the core are UTC milliseconds (the Redis server's clock);
datetimes appear only at the edges (API, SDK, CLI).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shardsched.core.errors import ValidationError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The last instant a schedule can name (datetime ends with year 9999): a schedule whose
#: next firing would be later is exhausted.
MAX_MS = 253_402_214_400_000  # 9999-12-31T00:00:00Z


def to_ms(dt: datetime) -> int:
    """Milliseconds since the epoch of an aware datetime."""
    return (dt - _EPOCH) // timedelta(milliseconds=1)


def given_ms(dt: datetime, field: str) -> int:
    """:func:`to_ms` of an instant a caller gave (an SDK argument): a naive datetime, or
    something else, is the ValidationError at ``field`` the API answers for it."""
    if not isinstance(dt, datetime) or dt.utcoffset() is None:
        raise ValidationError("Expected `datetime` with a timezone component", field)
    return to_ms(dt)


def from_ms(ms: int) -> datetime:
    """The UTC datetime of an instant in milliseconds."""
    return _EPOCH + timedelta(milliseconds=ms)
