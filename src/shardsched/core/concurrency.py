"""Concurrency and rate limits per key: how many runs sharing a key may execute at once
across the whole deployment, and how many may start per interval.

A job or a DAG task names a ``concurrency_key``: a literal (``billing-db``) or a template
over its labels (``tenant:{labels.tenant}``; a DAG task's labels are its DAG's). A limit
is set on the key (``PUT /api/v1/concurrency/{key}``), or given on the job
(``concurrency_limit``), which holds while the key has none of its own. A run over the
limit waits, in the order it came, without holding a worker slot (its state is
``waiting``), and starts when a run of the key ends.

A key's state lives in a hash slot of its own (store/keys.py :class:`ConcurrencyKeys`),
apart from every shard's: the limit, the runs holding it, the runs waiting and the
recent starts, changed atomically by the scripts of lua/ck_*.lua. How a run goes from a
worker's claim to a hold, or to waiting and back, is in docs/concepts.md.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

import msgspec

from shardsched.core.errors import ValidationError

#: A resolved key: part of Redis key names (in a hash tag: no braces) and metric labels.
KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@=+-]{0,127}$(?!\n)")
ConcurrencyKey = Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=KEY.pattern)]
#: A key as a job names it: a literal key, or one with ``{labels.<label>}`` in it.
KEY_TEMPLATE = re.compile(r"^[A-Za-z0-9{][A-Za-z0-9._:@=+{}-]{0,199}$(?!\n)")
KeyTemplate = Annotated[
    str, msgspec.Meta(min_length=1, max_length=200, pattern=KEY_TEMPLATE.pattern)
]
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
#: The most runs of one key at once (a limit), and starts per interval (a rate).
MAX_LIMIT = 100_000
Limit = Annotated[int, msgspec.Meta(ge=1, le=MAX_LIMIT)]


def resolve_key(template: str, labels: dict[str, str], path: str = "$.concurrency_key") -> str:
    """The key ``template`` names for a job with ``labels``: each ``{labels.<name>}``
    replaced by that label's value. Raises ValidationError (at ``path``) when a label is
    not set, a placeholder is not a label's, or the result is not a key."""

    def value(match: re.Match[str]) -> str:
        ref = match.group(1)
        if not ref.startswith("labels."):
            raise ValidationError(
                f"{{{ref}}} is not a placeholder: only {{labels.<name>}} is", path
            )
        name = ref.removeprefix("labels.")
        if name not in labels:
            raise ValidationError(f"the key needs label {name!r}, which is not set", path)
        return labels[name]

    key = _PLACEHOLDER.sub(value, template) if "{" in template else template
    check_key(key, path)
    return key


def check_key(key: str, path: str) -> None:
    """ValidationError (at ``path``) unless ``key`` can be a concurrency key."""
    if not KEY.match(key):
        raise ValidationError(
            f"{key!r} is not a concurrency key: letters, digits and ._:@=+- (no spaces, slashes or "
            "braces), at most 128, starting with a letter or digit",
            path,
        )


def key_or_none(
    template: str | None, labels: dict[str, str], path: str = "$.concurrency_key"
) -> str | None:
    """The key a job or task names (None: none); raises as :func:`resolve_key`."""
    return None if template is None else resolve_key(template, labels, path)


class RateLimit(msgspec.Struct, forbid_unknown_fields=True):
    """At most ``max`` starts of the key's runs in any ``per_s`` seconds (sliding)."""

    max: Limit
    per_s: Annotated[float, msgspec.Meta(ge=0.01, le=86400)]


class LimitRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``PUT /api/v1/concurrency/{key}``: a limit, a rate, or both. What is
    left out is cleared: the request says the whole of the key's limits."""

    limit: Limit | None = None
    rate: RateLimit | None = None


class LimitChange(msgspec.Struct, omit_defaults=True):
    """One entry of a key's change log: who set what, when."""

    at: datetime
    actor: str
    limit: int | None = None
    rate: RateLimit | None = None
    cleared: bool = False  #: the key's own limits were removed (DELETE)


class KeyView(msgspec.Struct):
    """A key's limits and what waits on it (``GET /api/v1/concurrency/{key}``)."""

    key: str
    #: the key's own limit (None: its jobs' ``concurrency_limit`` holds, else none)
    limit: int | None = None
    rate: RateLimit | None = None
    #: the limit its jobs gave, used while the key has none of its own
    job_limit: int | None = None
    running: int = 0  #: runs holding the key: executing, or granted and about to start
    waiting: int = 0  #: runs over the limit, waiting in order
    #: how long the oldest waiting run has waited (its lag), seconds
    oldest_wait_s: float | None = None
    changes: list[LimitChange] = msgspec.field(default_factory=list)
    #: one key read alone: which runs hold it and which wait, in order (the first of each)
    holding_runs: list[str] = msgspec.field(default_factory=list)
    waiting_runs: list[str] = msgspec.field(default_factory=list)


class KeyList(msgspec.Struct):
    keys: list[KeyView]
