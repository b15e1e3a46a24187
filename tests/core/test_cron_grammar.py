"""The cron grammar against references nobody here wrote (issue 48).

* **croniter 7** (the engine this project used before): random expressions in UTC must
  give the same next fires, except where our documented rule differs (each exclusion
  below names why);
* **cronsim 2.6's own test cases** (https://github.com/cuu508/cronsim, tests/test_cronsim.py,
  BSD-3-Clause, (c) 2021 Peteris Caune), copied as data: every one within the grammar
  passes, under the ``debian`` dialect where cronsim follows Debian cron (the AND day
  rule for ``*``-prefixed fields; a gap's fixed-time matches at the gap's end); the
  few that differ are listed in ``CRONSIM_DIFFERENCES`` with the documented rule that
  explains them.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from itertools import product

import pytest
from croniter import CroniterBadDateError, croniter
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_cron_reference import DAYS, HOUR, MINUTE, MONTH, _field, _range

from shardsched.core.cron import CronDialect
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.schedule import cron_next_ms, parse_cron

DEBIAN = CronDialect.DEBIAN

# -- croniter ---------------------------------------------------------------------------

_DOW = st.one_of(
    st.just("*"),
    _field(
        st.one_of(_range(0, 7), st.sampled_from(DAYS), st.integers(0, 6).map(lambda d: f"L{d}")),
        star=False,
    ),
)
_DOM = st.one_of(
    st.just("*"),
    _field(st.one_of(_range(1, 31), st.sampled_from(["L", "15W", "1W", "20-L"])), star=False),
)


def _croniter_differs(expression: str) -> str | None:
    """Why croniter's reading differs from the documented one, if it does."""
    dom, dow = expression.split()[2], expression.split()[4]
    if re.search(r"\b(\d+)-\1\b", expression):  # before the parse: 30-30 in February
        return "croniter reads some one-value ranges (0-0) as *"  # never fires here
    try:
        f = parse_cron(expression)
    except ValueError:
        return None  # refused here: the comparison says whether croniter agrees
    if re.search(r"(\d+)-(\d+)/", expression):
        return "a wrapping range with a step: we walk round it, croniter drops its tail"
    if re.search(r",L\b|\bL,", dom):
        return "croniter reads L in a day-of-month list oddly (2-31,L fires on Feb 1st)"
    if re.search(r"\b7-0\b", dow):
        return "7-0 (Sunday to Sunday): croniter walks the whole week, we read one day"
    if re.search(r",L\d|L\d,", dow):
        return "croniter ignores the rest of a day-of-week list beside L<d>"
    if (len(f.days) == 31 and dom != "*") or (len(f.weekdays) == 7 and dow != "*"):
        return "croniter reads a wrapping day range that covers every day otherwise"
    if dom != "*" and dow != "*" and ("L" in dow or "#" in dow or "W" in dom):
        return "croniter ANDs the day fields beside L, W or #; the OR rule applies (repro 5)"
    return None


def check_against_croniter(expression: str, minutes: int) -> None:
    if not croniter.is_valid(expression) or _croniter_differs(expression):
        return
    after = datetime(2015, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    it = croniter(expression, after.replace(tzinfo=None))
    try:
        want = [it.get_next(datetime) for _ in range(5)]
    except CroniterBadDateError:  # it never fires: refused here too
        with pytest.raises(ValueError, match="never fires"):
            parse_cron(expression)
        return
    got, t = [], to_ms(after)
    for _ in range(5):
        t = cron_next_ms(expression, "UTC", t)
        got.append(from_ms(t).replace(tzinfo=None))
    assert got == want, expression


_EXPRESSIONS = st.tuples(MINUTE, HOUR, _DOM, MONTH, _DOW).map(" ".join)
_MINUTES = st.integers(0, 20 * 365 * 1440)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_EXPRESSIONS, _MINUTES)
@example("* * 30-30 2 *", 0)  # February 30th as a range: never fires here, every minute there
def test_next_fires_in_utc_agree_with_croniter(expression: str, minutes: int) -> None:
    check_against_croniter(expression, minutes)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
@given(_EXPRESSIONS, _MINUTES)
def test_next_fires_in_utc_agree_with_croniter_at_5000_examples(
    expression: str, minutes: int
) -> None:
    check_against_croniter(expression, minutes)


# -- cronsim's cases ----------------------------------------------------------------------

#: cronsim TestParse: (expression, field, the values cronsim parses; weekday 7 is 0 here)
CRONSIM_PARSE = [
    ("* * * * *", "minutes", set(range(60))),
    ("* * * * *", "hours", set(range(24))),
    ("* * * * *", "days", set(range(1, 32))),
    ("* * * * *", "months", set(range(1, 13))),
    ("* * * * *", "weekdays", set(range(7))),
    ("1 * * * *", "minutes", {1}),
    ("* * * * 1", "weekdays", {1}),
    ("* * * * 0", "weekdays", {0}),
    ("1,2,3 * * * *", "minutes", {1, 2, 3}),
    ("1-3 * * * *", "minutes", {1, 2, 3}),
    ("1-3,7-9 * * * *", "minutes", {1, 2, 3, 7, 8, 9}),
    ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
    ("0-10/2 * * * *", "minutes", {0, 2, 4, 6, 8, 10}),
    ("5/15 * * * *", "minutes", {5, 20, 35, 50}),
    ("* * L * *", "last", {0}),
    ("* * l * *", "last", {0}),
    ("* * * * 1#2", "nth", {(1, 2)}),
    ("* * * * MON", "weekdays", {1}),
    ("* * * * mon", "weekdays", {1}),
    ("* * * JAN *", "months", {1}),
    ("* * * * 0-2", "weekdays", {0, 1, 2}),
    ("* * * * sun-tue", "weekdays", {0, 1, 2}),
    ("* * * * */2", "weekdays", {0, 2, 4, 6}),
    ("* * * * 1,2,3#1", "weekdays", {1, 2}),
    ("* * * * 1,2,3#1", "nth", {(3, 1)}),
    ("* * * * 7", "weekdays", {0}),
    ("* * * * 5L", "last_of", {5}),
]


@pytest.mark.parametrize(("expression", "name", "values"), CRONSIM_PARSE)
def test_cronsim_parse_cases(expression: str, name: str, values: set) -> None:
    assert set(getattr(parse_cron(expression), name)) == values


def test_cronsim_lw_parses_as_the_last_weekday() -> None:
    assert parse_cron("* * LW * *").last_weekday and parse_cron("* * lw * *").last_weekday


_BAD_PATTERNS = ("%s * * * *", "* %s * * *", "* * %s * *", "* * * %s * ", "* * * * %s",
                 "* * * * * %s", "1-%s * * * *", "%s-60 * * * *", "* * 1-%s * *",
                 "* * 1,%s * *", "* * %s/1 * *", "* * * %s-DEC *", "* * * JAN-%s *",
                 "* * * * %s-SUN", "* * * * MON-%s")  # fmt: skip
_BAD_VALUES = ("-1", "61", "ABC", "2/", "/2", "2#", "#2", "1##1", "1//2", "\u00b9", "LL", "LWX")
_REFUSED = ["* * * *", "1-1_0 * * * *", "*/0 * * * *", "* * * * 1#0", "* * * * 1#6",
            "* * 30 2 *", "* * 31 4 *", "* * * * 5L-6", "* * * * 5L#1", "* * * * 5L/3"]  # fmt: skip


@pytest.mark.parametrize(
    "expression", [p % v for p, v in product(_BAD_PATTERNS, _BAD_VALUES)] + _REFUSED
)
def test_cronsim_refused_cases_are_refused(expression: str) -> None:
    with pytest.raises(ValueError):
        parse_cron(expression)


_NOW = datetime(2020, 1, 1, tzinfo=UTC)
#: cronsim TestIterator: expression, the first fires after 2020-01-01 00:00 (naive = UTC)
CRONSIM_ITERATOR = [
    ("1 1 L * *", ["2020-01-31T01:01:00"]),
    ("1 1 LW 5 *", ["2020-05-29T01:01:00"]),
    ("1 1 * * 5L", ["2020-01-31T01:01:00", "2020-02-28T01:01:00", "2020-03-27T01:01:00",
                    "2020-04-24T01:01:00", "2020-05-29T01:01:00", "2020-06-26T01:01:00",
                    "2020-07-31T01:01:00", "2020-08-28T01:01:00", "2020-09-25T01:01:00",
                    "2020-10-30T01:01:00", "2020-11-27T01:01:00", "2020-12-25T01:01:00"]),
    ("1 1 * * 0L", ["2020-01-26T01:01:00"]),
    ("1 1 * * 7L", ["2020-01-26T01:01:00"]),
    ("1 1 * * 1#2", ["2020-01-13T01:01:00"]),
    ("1 1 1-7 * */7", ["2020-01-05T01:01:00", "2020-02-02T01:01:00", "2020-03-01T01:01:00",
                       "2020-04-05T01:01:00"]),
    ("1 1 */100,1-7 * MON", ["2020-01-06T01:01:00", "2020-02-03T01:01:00",
                             "2020-03-02T01:01:00", "2020-04-06T01:01:00"]),
    ("1 1 * * */3", ["2020-01-01T01:01:00", "2020-01-04T01:01:00", "2020-01-05T01:01:00",
                     "2020-01-08T01:01:00"]),
]  # fmt: skip


def _fires(expression: str, zone: str, after: datetime, n: int, dialect=DEBIAN) -> list[str]:
    out, t = [], to_ms(after)
    tz = zoneinfo.ZoneInfo(zone)
    for _ in range(n):
        t = cron_next_ms(expression, zone, t, dialect=dialect)
        shown = from_ms(t).astimezone(tz)
        out.append((shown.replace(tzinfo=None) if zone == "UTC" else shown).isoformat())
    return out


@pytest.mark.parametrize(("expression", "want"), CRONSIM_ITERATOR)
def test_cronsim_iterator_cases_under_the_debian_dialect(expression: str, want: list) -> None:
    assert _fires(expression, "UTC", _NOW, len(want)) == want


def test_cronsim_no_match_case_is_refused_as_never_firing() -> None:
    """cronsim: "the first date of the month *and* the fourth Monday" never fires."""
    with pytest.raises(ValueError, match="never fires"):
        parse_cron("1 1 */100 * MON#4", DEBIAN)


#: cronsim TestDstTransitions, Europe/Riga 2021: (expression, local start, fires)
CRONSIM_DST = [
    ("0 * * * *", "2021-03-28T01:30", ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00"]),
    (
        "0 * * * *",
        "2021-10-31T01:30",
        [
            "2021-10-31T02:00:00+03:00",
            "2021-10-31T03:00:00+03:00",
            "2021-10-31T03:00:00+02:00",
            "2021-10-31T04:00:00+02:00",
        ],
    ),
    (
        "*/30 * * * *",
        "2021-03-28T02:10",
        ["2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"],
    ),
    (
        "*/30 * * * *",
        "2021-10-31T02:10",
        [
            "2021-10-31T02:30:00+03:00",
            "2021-10-31T03:00:00+03:00",
            "2021-10-31T03:30:00+03:00",
            "2021-10-31T03:00:00+02:00",
            "2021-10-31T03:30:00+02:00",
            "2021-10-31T04:00:00+02:00",
        ],
    ),
    (
        "*/15 * * * *",
        "2021-03-28T02:40",
        ["2021-03-28T02:45:00+02:00", "2021-03-28T04:00:00+03:00"],
    ),
    (
        "0 */2 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T06:00:00+03:00"],
    ),
    (
        "0 */2 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-10-31T06:00:00+02:00"],
    ),
    (
        "30 */2 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:30:00+02:00", "2021-03-28T04:30:00+03:00"],
    ),
    (
        "30 */2 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:30:00+03:00", "2021-10-31T04:30:00+02:00"],
    ),
    (
        "0 */3 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T03:00:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T06:00:00+02:00"],
    ),
    (
        "0 1,2,3,4,5 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 1,2,3,4,5 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"],
    ),
    (
        "30 1,2,3,4,5 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:30:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T04:30:00+03:00"],
    ),
    (
        "30 1,2,3,4,5 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:30:00+03:00", "2021-10-31T03:30:00+03:00", "2021-10-31T04:30:00+02:00"],
    ),
    ("0 2 * * *", "2021-03-28T01:30", ["2021-03-28T02:00:00+02:00", "2021-03-29T02:00:00+03:00"]),
    ("0 2 * * *", "2021-10-31T01:30", ["2021-10-31T02:00:00+03:00", "2021-11-01T02:00:00+02:00"]),
    (
        "0 3 * * *",
        "2021-03-27T01:30",
        ["2021-03-27T03:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:00:00+03:00"],
    ),
    ("0 3 * * *", "2021-10-31T01:30", ["2021-10-31T03:00:00+03:00", "2021-11-01T03:00:00+02:00"]),
    (
        "0 4 * * *",
        "2021-03-27T01:30",
        ["2021-03-27T04:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T04:00:00+03:00"],
    ),
    (
        "0 4 * * *",
        "2021-10-30T01:30",
        ["2021-10-30T04:00:00+03:00", "2021-10-31T04:00:00+02:00", "2021-11-01T04:00:00+02:00"],
    ),
    (
        "0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"],
    ),
    (
        "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *",
        "2021-03-28T00:30",
        ["2021-03-28T01:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 1,3,5,7,9,11,13,15,17,19,21,23 * * *",
        "2021-10-31T00:30",
        ["2021-10-31T01:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T05:00:00+02:00"],
    ),
    (
        "0 1-5 * * *",
        "2021-03-28T01:30",
        ["2021-03-28T02:00:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-28T05:00:00+03:00"],
    ),
    (
        "0 1-5 * * *",
        "2021-10-31T01:30",
        ["2021-10-31T02:00:00+03:00", "2021-10-31T03:00:00+03:00", "2021-10-31T04:00:00+02:00"],
    ),
    (
        "15 3 * * *",
        "2021-03-27T00:00",
        ["2021-03-27T03:15:00+02:00", "2021-03-28T04:00:00+03:00", "2021-03-29T03:15:00+03:00"],
    ),
    (
        "15 3 * * *",
        "2021-10-30T00:00",
        ["2021-10-30T03:15:00+03:00", "2021-10-31T03:15:00+03:00", "2021-11-01T03:15:00+02:00"],
    ),
    ("* * * * *", "2021-03-28T02:58", ["2021-03-28T02:59:00+02:00", "2021-03-28T04:00:00+03:00"]),
    (
        "* * * * *",
        "2021-10-31T03:58",
        ["2021-10-31T03:59:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:01:00+02:00"],
    ),
    ("* 1-6 * * *", "2021-03-28T02:58", ["2021-03-28T02:59:00+02:00", "2021-03-28T04:00:00+03:00"]),
    (
        "* 1-6 * * *",
        "2021-10-31T03:58",
        ["2021-10-31T03:59:00+03:00", "2021-10-31T03:00:00+02:00", "2021-10-31T03:01:00+02:00"],
    ),
]


@pytest.mark.parametrize(("expression", "start", "want"), CRONSIM_DST)
def test_cronsim_dst_cases_under_the_debian_dialect(
    expression: str, start: str, want: list
) -> None:
    after = datetime.fromisoformat(start).replace(tzinfo=zoneinfo.ZoneInfo("Europe/Riga"))
    assert _fires(expression, "Europe/Riga", after, len(want)) == want


#: cronsim's cases outside the grammar or read otherwise, and the documented rule why.
CRONSIM_DIFFERENCES = {
    "* * L/2 * *": "a step after L or LW is refused: it has no meaning (cronsim ignores it)",
    "* * LW/2 * *": "as above",
    "* * 5-1 * *": "a range whose start is above its end wraps round (croniter's reading)",
    "* * * * MONL": "names stand wherever a number does: MONL is the last Monday",
    "reverse=True": "no reverse iteration: nothing here walks a schedule backwards",
}


def test_cronsim_differences_are_what_the_docs_say() -> None:
    for expression in ("* * L/2 * *", "* * LW/2 * *"):
        with pytest.raises(ValueError):
            parse_cron(expression)
    assert set(parse_cron("* * 5-1 * *").days) == {5, *range(6, 32), 1}
    assert parse_cron("* * * * MONL").last_of == {1}
