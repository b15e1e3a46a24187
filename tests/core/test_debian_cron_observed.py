"""The ``debian`` cron dialect held to Debian's own cron binary: what cron 3.0pl1 (the
package of Debian 12) was seen to run, line by line, across Berlin's two DST changes of
2026, captured from the real binary under an accelerated fake clock by
tools/cron_observed/capture.sh (the files in tests/core/cron_observed/ are its output,
kept: the capture needs root, libfaketime and the Debian archive). The engine's ticks, walked
by the test kit with the dialect an imported crontab gets, must fire in the very minutes
cron ran each line: the fixed-time lines of a skipped hour at its end, once in a
repeated hour; the wildcard lines on every minute that exists."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from shardsched import CronSchedule, JobSpec
from shardsched.testing import simulate

HERE = Path(__file__).resolve().parent / "cron_observed"
BERLIN = ZoneInfo("Europe/Berlin")
#: The capture's crontab lines, by the tag each wrote (tools/cron_observed/capture.sh).
LINES = {
    "every": "* * * * *",
    "0200": "0 2 * * *",
    "0215": "15 2 * * *",
    "0230": "30 2 * * *",
    "0300": "0 3 * * *",
    "s20": "*/20 * * * *",
    "h30": "30 * * * *",
}
#: file: (where the fake clock started, Berlin wall time; the minutes it ran)
CAPTURES = {
    "spring_2026_berlin.txt": (datetime(2026, 3, 29, 1, 40), 130),
    "fall_2026_berlin.txt": (datetime(2026, 10, 25, 1, 40), 150),
}


def observed(name: str) -> dict[str, list[str]]:
    runs: dict[str, list[str]] = {tag: [] for tag in LINES}
    for line in (HERE / name).read_text().splitlines():
        if line and not line.startswith("#"):
            tag, at = line.split()
            runs[tag].append(at[:16])  # the minute: cron starts a line in its first seconds
    return runs


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_the_debian_dialect_fires_when_debians_cron_ran(name: str) -> None:
    wall, minutes = CAPTURES[name]
    start = wall.replace(tzinfo=BERLIN).astimezone(UTC)
    # the capture's last minutes may be cut short by its end: compare up to 3 before
    until = start + timedelta(minutes=minutes - 3)
    cut = until.strftime("%Y-%m-%dT%H:%M")
    runs = observed(name)
    assert len(runs["every"]) >= minutes - 3, "the capture ran through the span"
    for tag, expression in LINES.items():
        spec = JobSpec(
            name=tag,
            command="x",
            schedule=CronSchedule(expression=expression, timezone="Europe/Berlin",
                                  dialect="debian"),
        )  # fmt: skip
        fired = simulate(spec, start, until - start).fired()
        ours = [t.fired_at.strftime("%Y-%m-%dT%H:%M") for t in fired]
        theirs = [at for at in runs[tag] if at <= cut]
        assert ours == theirs, (name, tag, expression)
