"""The fast cron engine against the slow reference model (issue 48): random expressions
over the whole grammar, every DST policy and both dialects, in zones with odd clocks,
at instants from 2010 to 2035, mostly next to an offset change. Fire times, each fire's
note and every wall time not fired must agree exactly.

The default profile runs a few hundred examples; ``-m slow`` runs tens of thousands.
The model (core/cron_reference.py) shares only the parse with the engine; the parse is
held to croniter and to cronsim's cases elsewhere (test_cron_grammar.py)."""

from __future__ import annotations

import functools
import zoneinfo
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardsched.core import cron_reference as ref
from shardsched.core.cron import CronDialect
from shardsched.core.dst import dst_decisions
from shardsched.core.dst_policy import DstGap, DstPolicy, DstRepeat
from shardsched.core.instants import from_ms, to_ms
from shardsched.core.jitter import resolve_h
from shardsched.core.schedule import cron_next_ms, parse_cron

ZONES = [
    "Australia/Lord_Howe",
    "Pacific/Apia",
    "America/Santiago",
    "Asia/Beirut",
    "America/Havana",
    "Asia/Tehran",
    "Europe/Dublin",
    "Antarctica/Troll",
    "America/New_York",
    "Europe/London",
    "UTC",
]
MONTHS = ["jan", "FEB", "Mar", "apr", "MAY", "jun", "JUL", "aug", "Sep", "oct", "NOV", "dec"]
DAYS = ["sun", "MON", "Tue", "wed", "THU", "fri", "SAT"]


@functools.cache
def _changes(zone: str) -> list[datetime]:
    """The zone's offset changes 2010-2035, to the hour, found by sampling (not the
    engine's): a day whose two ends differ in offset is walked hour by hour. A day that
    ends on the offset it began with is taken to hold no change (no zone here changes
    twice in a day). Computed when a test first draws from the zone, not at collection."""
    tz = zoneinfo.ZoneInfo(zone)
    out = []
    day, hour = timedelta(days=1), timedelta(hours=1)
    t = datetime(2010, 1, 1, tzinfo=UTC)
    last = t.astimezone(tz).utcoffset()
    while t.year < 2036:
        if (t + day).astimezone(tz).utcoffset() != last:
            for _ in range(24):
                t += hour
                o = t.astimezone(tz).utcoffset()
                if o != last:
                    out.append(t)
                    last = o
        else:
            t += day
    return out or [datetime(2026, 3, 8, 7, tzinfo=UTC)]


def _range(lo: int, hi: int) -> st.SearchStrategy[str]:
    n = st.integers(lo, hi)
    return st.one_of(
        n.map(str),
        st.tuples(n, n).map(lambda ab: f"{ab[0]}-{ab[1]}"),
        st.tuples(n, st.integers(1, hi - lo + 2)).map(lambda a: f"{a[0]}/{a[1]}"),
        st.tuples(n, n, st.integers(1, 12)).map(lambda a: f"{a[0]}-{a[1]}/{a[2]}"),
        st.integers(1, hi - lo + 2).map(lambda s: f"*/{s}"),
    )


def _field(term: st.SearchStrategy[str], star: bool = True) -> st.SearchStrategy[str]:
    listed = st.lists(term, min_size=1, max_size=3).map(",".join)
    return st.one_of(st.just("*"), listed) if star else listed


_h = st.sampled_from(["H", "H(0-5)", "H/15", "H(1-4)/2"])
MINUTE = _field(st.one_of(_range(0, 59), st.sampled_from(["0", "15", "30", "45"])))
HOUR = _field(st.one_of(_range(0, 23), st.sampled_from(["0", "1", "2", "3", "*/2", "1-3"])))
DOM = st.one_of(
    st.just("*"),
    st.just("?"),
    _field(
        st.one_of(
            _range(1, 31),
            st.sampled_from(["L", "LW", "L-1", "L-7", "15W", "1W", "31W", "l", "20-L"]),
            st.integers(1, 31).map(lambda d: f"{d}W"),
            st.integers(0, 30).map(lambda d: f"L-{d}"),
        ),
        star=False,
    ),
)
MONTH = _field(st.one_of(_range(1, 12), st.sampled_from(MONTHS), st.just("jan-MAR")))
DOW = st.one_of(
    st.just("*"),
    st.just("?"),
    _field(
        st.one_of(
            _range(0, 7),
            st.sampled_from(DAYS),
            st.sampled_from(["MON-fri", "sat-sun", "5-1"]),
            st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda a: f"{a[0]}#{a[1]}"),
            st.tuples(st.sampled_from(DAYS), st.integers(1, 5)).map(lambda a: f"{a[0]}#{a[1]}"),
            st.integers(0, 7).map(lambda d: f"{d}L"),
        ),
        star=False,
    ),
)

POLICIES = st.one_of(
    st.just(msgspec.UNSET),
    st.builds(
        DstPolicy,
        gap=st.one_of(st.none(), st.sampled_from(list(DstGap))),
        repeat=st.one_of(st.none(), st.sampled_from(list(DstRepeat))),
    ),
)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, CronDialect, str, object, datetime]:
    fields = [draw(MINUTE), draw(HOUR), draw(DOM), draw(MONTH), draw(DOW)]
    if draw(st.booleans()) and draw(st.booleans()):  # an H term, resolved per job
        fields[draw(st.integers(0, 1))] = draw(_h)
    expression = resolve_h(" ".join(fields), draw(st.sampled_from(["a", "job-7", "x.y"])))
    dialect = draw(st.sampled_from(list(CronDialect)))
    zone = draw(st.sampled_from(ZONES))
    if draw(st.integers(0, 4)):  # mostly next to an offset change
        change = draw(st.sampled_from(_changes(zone)))
        after = change + timedelta(minutes=draw(st.integers(-3 * 1440, 1440)))
    else:
        after = datetime(2010, 1, 1, tzinfo=UTC) + timedelta(
            minutes=draw(st.integers(0, 26 * 365 * 1440))
        )
    after += timedelta(seconds=draw(st.sampled_from([0, 0, 30, 59])))
    return expression, dialect, zone, draw(POLICIES), after


def _engine_fires(
    expression: str, zone: str, after: datetime, dst: object, dialect: CronDialect, n: int
) -> list[datetime]:
    out, t = [], to_ms(after)
    for _ in range(n):
        try:
            t = cron_next_ms(expression, zone, t, dst, dialect)  # type: ignore[arg-type]
        except OverflowError:
            break
        out.append(from_ms(t))
    return out


def check(expression: str, dialect: CronDialect, zone: str, dst: object, after: datetime) -> None:
    try:
        fields = parse_cron(expression, dialect)
    except ValueError:
        return  # refused at creation (a 422): nothing to schedule
    fires = _engine_fires(expression, zone, after, dst, dialect, 6)
    until = min([*fires[-1:], after + timedelta(days=5 * 366)])
    fires = [t for t in fires if t <= until]
    notes, unfired = dst_decisions(fields, zone, dst, after, until)  # type: ignore[arg-type]
    want_fires, want_unfired = ref.decide(fields, zone, dst, after, until)  # type: ignore[arg-type]
    tz = zoneinfo.ZoneInfo(zone)

    def shown(t: datetime) -> str:
        return t.astimezone(tz).strftime("%Y-%m-%d %H:%M%z")

    assert [(shown(t), notes.get(t)) for t in fires] == [
        (shown(f.instant), f.note) for f in want_fires
    ], (expression, dialect, zone, dst, after)
    assert [(shown(u.instant), u.wall, u.reason) for u in unfired] == [
        (shown(u.instant), u.wall, u.reason) for u in want_unfired
    ], (expression, dialect, zone, dst, after)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_the_engine_agrees_with_the_reference_model(case: tuple) -> None:
    check(*case)


@pytest.mark.slow
@pytest.mark.parametrize("quarter", range(4))
@settings(max_examples=5_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases())
def test_the_engine_agrees_with_the_reference_model_at_20000_examples(
    quarter: int, case: tuple
) -> None:
    """20,000 examples in four quarters of 5,000, so that `pytest -n 4` runs them side by side
    (each quarter draws its own random examples: `quarter` only names the part)."""
    check(*case)
