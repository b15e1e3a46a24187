"""How the CLI shows a schedule's time: a resume's owed ticks, a job's ticks counted, a
backfill (or its dry run's list), a job's upcoming fires and its ticks."""

from __future__ import annotations

from typing import Any

from shardsched.cli import style
from shardsched.cli.render import table


def resume_text(o: dict[str, Any]) -> str:
    ticks = [style.when(t) for t in o["owed"]]
    listed = "".join(f"\n  {t}" for t in ticks[:50]) + (
        f"\n  … and {len(ticks) - 50} more" if len(ticks) > 50 else ""
    )
    if o["dry_run"]:
        return f"dry run ({o['catchup']}): {len(ticks)} tick(s) of the pause would run{listed}"
    return (
        f"{o['job_id']}  {o['job']['status']} ({o['catchup']}): {len(ticks)} tick(s) of the"
        f" pause run, {o['queued']} queued{listed}"
    )


def stats_text(o: dict[str, Any]) -> str:
    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(o["skipped"].items())) or "0"
    return (
        f"{o['job_id']} from {style.when(o['since'])} to {style.when(o['until'])}\n"
        f"  {o['ticks']} ticks: {o['fired']} fired ({o['late']} late), skipped {skipped}, "
        f"{o['missed']} missed, {o['pending']} pending\n  {o['summary']}"
    )


def backfill_text(o: dict[str, Any]) -> str:
    if o.get("dry_run"):
        rows = [[style.when(t["tick"]), t["gap"], t.get("reason") or t.get("run_id") or ""]
                for t in o["listed"]]  # fmt: skip
        more = o["picked"] - len(o["listed"])
        text = f"dry run: {o['picked']} of {o['ticks']} ticks would run"
        return (
            text
            + ("\n" + table(["TICK", "GAP", "WHY"], rows) if rows else "")
            + (f"\n… and {more} more" if more > 0 else "")
        )
    text = (
        f"{o['ticks']} ticks: {o['queued']} queued, {o['already']} had a run, "
        f"{o['started']} started"
    )
    return text + (f", {o['retried']} failed ones run again" if o.get("retried") else "")


_STOPS = {
    "paused": "paused: no fires until it is resumed",
    "deleted": "deleted: it fires no more",
    "max_fires": "it has fired all its max_fires",
    "window_ended": "past its ends_at",
    "exhausted": "its schedule fires no more",
    "calendar": "no day its calendars allow within reach",
    "not_planned": "not planned yet (its owner plans it within a second)",
}


def upcoming_text(o: dict[str, Any]) -> str:
    """A job's next fires (``jobs next``): UTC, its own wall clock, DST notes, why fewer."""
    rows = [
        [style.when(f["at"]), f["local"].replace("T", " "), f.get("dst") or ""]
        for f in o["fire_times"]
    ]
    head = f"{o['job_id']}  {o['status']}"
    if o.get("resumes_at"):
        head += f", paused until {style.when(o['resumes_at'])}: fires from then on"
    lines = [head]
    if rows:
        lines.append(table(["UTC", "ON ITS CLOCK", "DST"], rows))
    skipped = [f"{s['wall_time']} ({s['reason']})" for s in o["suppressed"]]
    if skipped:
        lines.append("not fired: " + ", ".join(skipped[:20]))
    if o.get("stops"):
        lines.append(("no more: " if rows else "none: ") + _STOPS.get(o["stops"], o["stops"]))
    return "\n".join(lines)


def ticks_text(o: dict[str, Any]) -> str:
    """``jobs ticks``: each tick and what became of it: fired (and how its run ended, on
    its last attempt), skipped and why, missed, pending."""
    rows = []
    for t in o["ticks"]:
        ended = t.get("run_state") or ""
        if t.get("attempts", 1) > 1:
            ended += f" after {t['attempts']} attempts"
        lag = f"{t['lag_s']:.1f}s" if t.get("lag_s") is not None else ""
        rows.append([style.when(t["tick"]), t["outcome"], ended, lag,
                     t.get("reason") or t.get("last_run_id") or t.get("run_id") or ""])  # fmt: skip
    more = "\n(more: a narrower --since/--until)" if o.get("truncated") else ""
    return table(["TICK", "OUTCOME", "RUN ENDED", "LAG", "RUN / WHY"], rows) + more
