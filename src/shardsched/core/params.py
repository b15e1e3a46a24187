"""A run's parameters and a manual trigger's options: what a job's ``args`` may hold, and
how a repeated trigger is told apart from a new one (``idempotency_key``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

from shardsched.core.errors import ValidationError
from shardsched.core.text import Reason

#: A run's parameters: a JSON object, at most ARGS_MAX_BYTES encoded (:func:`validate_args`).
Args = dict[str, Any]
ARGS_MAX_BYTES = 65536
#: An idempotency key of a manual trigger: printable, no spaces, at most 200 characters.
IdempotencyKey = Annotated[
    str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[!-~]+$(?!\n)")
]


class TriggerRequest(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The (optional) body of ``POST /api/v1/jobs/{id}/trigger`` and of a DAG's trigger."""

    #: args for this run instead of the job's (a DAG run's: shared by its tasks)
    args: Args | None = None
    #: a second trigger of the job with this key within IDEMPOTENCY_TTL_S makes no run
    #: and answers the first one's run id (jobs only)
    idempotency_key: IdempotencyKey | None = None


#: How long a trigger's idempotency key is remembered, per job.
IDEMPOTENCY_TTL_S = 24 * 3600


def validate_args(args: Args | None, field: str = "$.args") -> bytes:
    """``args`` encoded (b"" for None); ValidationError past ARGS_MAX_BYTES."""
    if args is None:
        return b""
    raw = msgspec.json.encode(args)
    if len(raw) > ARGS_MAX_BYTES:
        raise ValidationError(
            f"args are {len(raw)} bytes as JSON, more than {ARGS_MAX_BYTES}", field
        )
    return raw


class CancelRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The optional body of a cancel (a run, a DAG run): why, recorded with who."""

    reason: Reason = ""


RunIdText = Annotated[str, msgspec.Meta(min_length=1, max_length=400)]
_Aware = Annotated[datetime, msgspec.Meta(tz=True)]


class RetryRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /api/v1/dead-letter/retry``: the dead-lettered runs named, or (with no
    ``run_ids``) every one the failure inbox lists ended within [since, until] of jobs
    named with ``name_prefix``; ``dry_run`` says what it would do and writes nothing."""

    run_ids: Annotated[list[RunIdText], msgspec.Meta(max_length=1000)] | None = None
    since: _Aware | None = None
    until: _Aware | None = None
    name_prefix: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None
    dry_run: bool = False
