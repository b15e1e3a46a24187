"""Backpressure on firing: what a job's tick does while its runs are still queued (its
workers behind), as the job declares it (``backlog``) and as fire.lua reads it."""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec


class Backlog(enum.StrEnum):
    """What a tick does when the job's runs are still queued beyond its bound (workers
    behind): fire anyway, skip it (recorded ``backlog``), or let the queued run stand
    for it (recorded ``coalesced``, the tick listed on that run)."""

    QUEUE = "queue"
    SKIP = "skip"
    COALESCE = "coalesce"


class BacklogPolicy(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A job's backpressure: over ``max_queued`` of its runs queued (not yet claimed), or
    its oldest queued one older than ``max_age_s``, a tick does as ``policy`` says."""

    policy: Backlog = Backlog.QUEUE
    max_queued: Annotated[int, msgspec.Meta(ge=1, le=100)] | None = None
    max_age_s: Annotated[float, msgspec.Meta(ge=0.1, le=7 * 86400)] | None = None

    def code(self) -> str:
        """As fire.lua reads it on the item's overlap code ('' for queue): ``:p<n>`` skip
        or ``:c<n>`` coalesce past n queued (0: no count bound), ``:g<ms>`` past that age."""
        if self.policy == Backlog.QUEUE:
            return ""
        code = (":p" if self.policy == Backlog.SKIP else ":c") + str(self.max_queued or 0)
        if self.max_age_s is not None:
            code += f":g{round(self.max_age_s * 1000)}"
        return code
