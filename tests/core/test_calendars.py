"""Named calendars, pure: which days a calendar holds, what a rule of include and exclude
allows, and the decision a due tick gets (fire, or skipped ``calendar``), with the day
read on the schedule's own wall clock."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import msgspec
import pytest

from shardsched.core.calendars import Calendar, CalendarRule, DateRange, Weekday, day_allowed
from shardsched.core.catchup import Decision, Skip, on_calendar
from shardsched.core.errors import ValidationError
from shardsched.core.instants import to_ms
from shardsched.core.models import CronSchedule, IntervalSchedule, SchedulePreviewRequest, Timing
from shardsched.core.preview import preview
from shardsched.core.views import SchedulePreview

HOLIDAYS = Calendar(
    dates=[date(2026, 12, 25), date(2026, 12, 26)],
    ranges=[DateRange(date(2026, 8, 3), date(2026, 8, 14))],
)
WEEKEND = Calendar(weekdays=[Weekday.SAT, Weekday.SUN])
BOOK = {"holidays": HOLIDAYS, "weekend": WEEKEND}
BUSINESS = CalendarRule(exclude=["holidays", "weekend"])


@pytest.mark.parametrize(
    ("day", "allowed"),
    [
        (date(2026, 12, 24), True),  # a Thursday
        (date(2026, 12, 25), False),  # a date of holidays
        (date(2026, 12, 26), False),  # a Saturday and a date
        (date(2026, 12, 27), False),  # a Sunday
        (date(2026, 12, 28), True),
        (date(2026, 8, 2), False),  # Sunday before the range
        (date(2026, 8, 3), False),  # the range's first day
        (date(2026, 8, 14), False),  # its last, included
        (date(2026, 8, 17), True),  # the Monday after
    ],
)
def test_business_days_exclude_holidays_and_weekends(day: date, allowed: bool) -> None:
    assert day_allowed(BUSINESS, BOOK, day) is allowed


def test_include_is_any_of_its_calendars_and_exclude_wins() -> None:
    rule = CalendarRule(include=["weekend", "holidays"], exclude=["xmas"])
    book = {**BOOK, "xmas": Calendar(dates=[date(2026, 12, 26)])}
    assert day_allowed(rule, book, date(2026, 12, 27))  # a Sunday
    assert day_allowed(rule, book, date(2026, 12, 25))  # a holiday, a Friday
    assert not day_allowed(rule, book, date(2026, 12, 26))  # both, and excluded
    assert not day_allowed(rule, book, date(2026, 12, 23))  # neither


def test_a_missing_calendar_has_no_day() -> None:
    assert not day_allowed(CalendarRule(include=["gone"]), BOOK, date(2026, 12, 23))
    assert day_allowed(CalendarRule(exclude=["gone"]), BOOK, date(2026, 12, 23))


def test_the_day_is_the_schedules_wall_clock_day() -> None:
    """23:30 UTC on Thursday 24 Dec is 00:30 on Friday the 25th in Berlin: a holiday."""
    tick = to_ms(datetime(2026, 12, 24, 23, 30, tzinfo=UTC))
    berlin = Timing(CronSchedule("30 0 * * *", "Europe/Berlin"), calendars=BUSINESS)
    utc = Timing(IntervalSchedule(every_s=60), calendars=BUSINESS)
    fire = Decision(tick, tick + 86_400_000)
    assert on_calendar(fire, berlin, BOOK) == Decision(
        None, tick + 86_400_000, Skip(tick, tick, 1, "calendar")
    )
    assert on_calendar(fire, utc, BOOK) == fire  # Thursday in UTC


def test_a_catch_up_skip_is_kept_and_the_tick_left_to_the_next_pass() -> None:
    tick = to_ms(datetime(2026, 12, 25, 9, tzinfo=UTC))
    timing = Timing(IntervalSchedule(every_s=60), calendars=BUSINESS)
    older = Skip(tick - 600_000, tick - 60_000, 10, "catchup_latest")
    got = on_calendar(Decision(tick, tick + 60_000, older), timing, BOOK)
    assert got == Decision(None, tick, older)
    # and on that pass, with no older tick owed, the tick itself is skipped
    again = on_calendar(Decision(tick, tick + 60_000), timing, BOOK)
    assert again.fire is None and again.skip == Skip(tick, tick, 1, "calendar")


def test_no_rule_or_no_fire_is_left_alone() -> None:
    tick = to_ms(datetime(2026, 12, 25, 9, tzinfo=UTC))
    plain = Timing(IntervalSchedule(every_s=60))
    assert on_calendar(Decision(tick, tick + 1), plain, BOOK) == Decision(tick, tick + 1)
    ruled = Timing(IntervalSchedule(every_s=60), calendars=BUSINESS)
    skip = Decision(None, tick, Skip(1, 2, 2, "misfire"))
    assert on_calendar(skip, ruled, BOOK) == skip


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("ok", {"ranges": [{"start": "2026-02-01", "end": "2026-01-01"}]}),
        ("_x", {}),
        ("a b", {}),
        ("a\x00b", {}),
    ],
)
def test_bad_calendars_are_refused(name: str, body: dict) -> None:
    with pytest.raises(ValidationError):
        msgspec.convert(body, Calendar).check(name)


def test_a_calendar_round_trips_through_json() -> None:
    raw = msgspec.json.encode(HOLIDAYS)
    assert msgspec.json.decode(raw, type=Calendar) == HOLIDAYS
    assert b"weekdays" not in raw  # defaults left out


def _preview(**fields) -> SchedulePreview:
    after = datetime(2026, 12, 21, 12, tzinfo=UTC)  # a Monday
    body = {"schedule": {"type": "cron", "expression": "0 9 * * *"}, "after": after, **fields}
    return preview(msgspec.convert(body, SchedulePreviewRequest), 0, BOOK)


def test_the_preview_shows_calendars_windows_and_max_fires() -> None:
    days = lambda p: [f.at.date().isoformat() for f in p.fire_times]  # noqa: E731
    plain = _preview(count=5)
    assert days(plain) == ["2026-12-22", "2026-12-23", "2026-12-24", "2026-12-25", "2026-12-26"]
    business = _preview(count=5, calendars={"exclude": ["holidays", "weekend"]})
    assert days(business) == ["2026-12-22", "2026-12-23", "2026-12-24", "2026-12-28", "2026-12-29"]
    assert [(s.wall_time, s.reason) for s in business.suppressed] == [
        ("2026-12-25T09:00:00", "calendar"),
        ("2026-12-26T09:00:00", "calendar"),
        ("2026-12-27T09:00:00", "calendar"),
    ]
    assert business.stops is None
    capped = _preview(count=5, max_fires=2)
    assert days(capped) == ["2026-12-22", "2026-12-23"] and capped.stops == "max_fires"
    window = _preview(count=5, starts_at="2026-12-23T00:00:00Z", ends_at="2026-12-25T10:00:00Z")
    assert days(window) == ["2026-12-23", "2026-12-24", "2026-12-25"]
    assert window.stops == "window_ended"
    never = _preview(count=3, calendars={"include": ["nothing"]})
    assert never.fire_times == [] and never.stops == "calendar"
    assert len(never.suppressed) == 200  # listed up to a bound
    once = preview(
        msgspec.convert(
            {"schedule": {"type": "once", "at": "2027-01-01T00:00:00Z"}, "count": 3},
            SchedulePreviewRequest,
        ),
        0,
    )
    assert len(once.fire_times) == 1 and once.stops == "exhausted"


def test_a_window_schedule_previews_when_each_window_closes() -> None:
    body = {
        "schedule": {"type": "window", "cron": "0 2 * * *", "duration_s": 14400,
                     "timezone": "Europe/Berlin"},
        "after": "2026-12-21T12:00:00Z",
        "count": 2,
    }  # fmt: skip
    got = preview(msgspec.convert(body, SchedulePreviewRequest), 0)
    assert [(f.local.hour, f.window_closes - f.at) for f in got.fire_times] == [
        (2, timedelta(hours=4)),
        (2, timedelta(hours=4)),
    ]
