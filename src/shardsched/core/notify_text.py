"""The words of a notification: one message for a group of matches, saying what happened
in terms a person can act on (which job, which tick, which attempt, why, the end of its
output, where to look). Pure."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import msgspec

from shardsched.core.ids import parse_dag_run_id, parse_task_job_id
from shardsched.core.notify import Kind

#: Items a message details; the rest are counted.
DETAILED = 20
OUTPUT_TAIL = 800

_WHAT = {
    Kind.FAILED: "failed for good",
    Kind.DEAD_LETTER: "dead-lettered",
    Kind.MISSED: "missed ticks",
    Kind.RECOVERED: "recovered",
    Kind.QUARANTINED: "quarantined",
    Kind.AUTO_PAUSED: "auto-paused",
    Kind.OVERRUNNING: "overrunning",
    Kind.DEADLINE_MISSED: "missed a deadline",
    Kind.ALERT: "alert",
}


class Item(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One match, as a message shows it."""

    kind: Kind
    at: datetime  #: when the transition happened
    job_id: str
    run_id: str | None = None
    dag_run_id: str | None = None
    name: str | None = None
    labels: dict[str, str] = {}
    tick: datetime | None = None  #: the scheduled time, when the run has one
    attempt: int | None = None
    state: str | None = None
    reason: str | None = None  #: exit code, timeout, lease lost, the skip's reason...
    exit_code: int | None = None
    output_tail: str | None = None
    link: str | None = None  #: the run's (or job's) page in the console, when served


def line(item: Item) -> str:
    """One item in words: ``nightly (job_x) failed for good: tick …, attempt 3: exit 1``."""
    who = f"{item.name} ({item.job_id})" if item.name else item.job_id
    text = f"{who} {_WHAT[item.kind]}"
    where = []
    if item.tick:
        where.append(f"tick {item.tick.isoformat(timespec='seconds').replace('+00:00', 'Z')}")
    if item.attempt:
        where.append(f"attempt {item.attempt}")
    if where:
        text += " at " + ", ".join(where)
    if item.reason:
        text += f": {item.reason}"
    return text


def _dag_run_title(items: list[Item]) -> str:
    """One DAG run's matches (its own and its tasks') as one story: which DAG run, what
    became of it, and which task did what, why."""
    own = next((i for i in items if i.run_id is None), None)
    drid = items[0].dag_run_id or ""
    dag_name = own.name if own is not None and own.name else parse_dag_run_id(drid)[0]
    what = _WHAT[own.kind] if own is not None else "has tasks that ended badly"
    tasks = []
    for i in items:
        if i.run_id is None:
            continue
        parts = parse_task_job_id(i.job_id)
        task = parts[1] if parts else i.job_id
        tasks.append(f"task {task} {_WHAT[i.kind]}" + (f": {i.reason}" if i.reason else ""))
    why = "; ".join(tasks[:3]) + (f"; and {len(tasks) - 3} more" if len(tasks) > 3 else "")
    return f"{dag_name}: DAG run {drid} {what}" + (f" ({why})" if why else "")


def compose(msg_id: str, rule_id: str, items: list[Item], total: int) -> dict[str, Any]:
    """The message of a group: ``items`` detailed (at most DETAILED of the ``total``
    matches), its title and text for chat and mail, its counts for machines."""
    counts = Counter(str(i.kind) for i in items)
    jobs = Counter(i.job_id for i in items)
    shown = items[:DETAILED]
    one_dag_run = {i.dag_run_id for i in items}
    if total == 1:
        title = line(items[0])
    elif total == len(items) and len(one_dag_run) == 1 and None not in one_dag_run:
        title = _dag_run_title(items)
    else:
        what = ", ".join(f"{n} {_WHAT[Kind(k)]}" for k, n in counts.most_common())
        title = f"shardsched: {total} notifications ({what}) across {len(jobs)} job(s)"
    body = [line(i) + (f"\n  {i.link}" if i.link else "") for i in shown]
    if total > len(shown):
        body.append(f"... and {total - len(shown)} more")
    if total == 1 and shown[0].output_tail:
        body.append("output (tail):\n" + shown[0].output_tail)
    return {
        "id": msg_id,
        "rule": rule_id,
        "title": title[:300],
        "text": "\n".join(body),
        "total": total,
        "counts": dict(counts),
        "jobs": dict(jobs.most_common(50)),
        "items": msgspec.to_builtins(shown),
        "omitted": total - len(shown),
    }
