"""Plans on concurrency keys: set and clear a key's limits, read one or every key."""

from __future__ import annotations

import msgspec

from shardsched.core.concurrency import KEY, KeyList, KeyView, LimitRequest, RateLimit
from shardsched.core.errors import ValidationError
from shardsched.core.validation import checked
from shardsched.ops.deployment import concurrency
from shardsched.sdk.plans import Handle, Plan, as_validation_error


def key_checked(key: str) -> str:
    """The key, or ValidationError (at ``key``) for one no key can be (both clients)."""
    if not KEY.match(key):
        raise ValidationError(f"{key!r} is not a concurrency key", "key")
    return key


def set_concurrency_limits(
    c: Handle, key: str, limit: int | None = None, rate: tuple[int, float] | None = None
) -> Plan[KeyView]:
    """Set ``key``'s limit (runs at once) and ``rate`` (starts, per seconds); what is left
    out is cleared. Live at the next start, and recorded in the key's change log."""
    try:
        request = checked(LimitRequest(limit, None if rate is None else RateLimit(*rate)))
    except msgspec.ValidationError as exc:
        raise as_validation_error(exc) from None
    return Plan(concurrency.set_limits(c.deployment, key_checked(key), request, c.actor))


def clear_concurrency_limits(c: Handle, key: str) -> Plan[KeyView]:
    return Plan(concurrency.clear_limits(c.deployment, key_checked(key), c.actor))


def get_concurrency_key(c: Handle, key: str) -> Plan[KeyView]:
    return Plan(concurrency.get_key(c.deployment, key_checked(key)))


def list_concurrency_keys(c: Handle) -> Plan[KeyList]:
    return Plan(concurrency.list_keys(c.deployment))
