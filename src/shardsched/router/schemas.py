"""The query strings of the list endpoints, as msgspec Structs.

Decoded with ``msgspec.convert(..., strict=False)`` so numbers, times and enums arrive typed,
an unknown parameter is a 422 naming it, and the OpenAPI document describes exactly these.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from shardsched.models import AwareDatetime, JobStatus, RunState

#: Largest page any list answers.
MAX_PAGE = 1000
PageSize = Annotated[int, msgspec.Meta(ge=1, le=MAX_PAGE)]
CursorText = Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
Prefix = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class JobQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/jobs: newest first."""

    limit: PageSize = 50
    cursor: CursorText | None = None
    status: JobStatus | None = None
    name_prefix: Prefix | None = None


class RunQuery(msgspec.Struct, forbid_unknown_fields=True):
    """GET /api/v1/jobs/{id}/runs: newest first by scheduled_for; since/until bound it."""

    limit: PageSize = 50
    cursor: CursorText | None = None
    state: RunState | None = None
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None


class DeadLetterQuery(msgspec.Struct, forbid_unknown_fields=True):
    limit: PageSize = 100
    cursor: CursorText | None = None


class DagQuery(msgspec.Struct, forbid_unknown_fields=True):
    limit: PageSize = 100
    cursor: CursorText | None = None
    status: JobStatus | None = None
    name_prefix: Prefix | None = None


class DagRunQuery(msgspec.Struct, forbid_unknown_fields=True):
    limit: PageSize = 50
    cursor: CursorText | None = None
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None


class TicksQuery(msgspec.Struct, forbid_unknown_fields=True, rename={"from_": "from"}):
    """GET /api/v1/jobs/{id}/ticks: every nominal tick in [from, to] and its fate."""

    from_: AwareDatetime | None = None
    to: AwareDatetime | None = None
    limit: Annotated[int, msgspec.Meta(ge=1, le=10000)] = 1000
