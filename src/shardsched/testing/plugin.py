"""The pytest plugin of :mod:`shardsched.testing` (registered as ``shardsched`` under
pytest's ``pytest11`` entry points, so installing shardsched makes the fixture known)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import pytest

from shardsched.core.calendars import Calendar
from shardsched.testing.clock import VirtualClock
from shardsched.testing.jobs import JobsLike


@pytest.fixture
def virtual_clock() -> Callable[..., VirtualClock]:
    """A factory of virtual clocks: ``virtual_clock(jobs, start, calendars=None)``."""

    def make(
        jobs: JobsLike, start: datetime, calendars: Mapping[str, Calendar] | None = None
    ) -> VirtualClock:
        return VirtualClock(jobs, start, dict(calendars or {}))

    return make
