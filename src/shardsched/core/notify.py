"""Notifications, the pure part: what a person should hear about, which rules choose it,
which channels carry it.

A notification starts as a transition on a shard's event stream (lua/lib/events.lua),
read by the shard's owner (shard/follower.py): a run that failed for good or was
dead-lettered, missed ticks (the owner's finding), a job quarantined or auto-paused, a run
overrunning (its worker tells), a deadline missed (a DAG task past its stall SLA), and the
first success of a job after such failures (recovered). :func:`noted` picks those out of one
stream entry; a :class:`Rule` says whose of them go to which :class:`Channel`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from shardsched.core.errors import ValidationError
from shardsched.core.ids import (
    attempt_of,
    dag_run_of,
    is_dag_id,
    job_of_run,
    parse_task_job_id,
    with_attempt,
)


class Kind(enum.StrEnum):
    FAILED = "failed"  #: a run (or a DAG run) failed with no attempt left
    DEAD_LETTER = "dead_letter"  #: a run was dead-lettered
    #: ticks whose time plus misfire grace passed before they fired (late or skipped),
    #: as the owner found them (the missed-schedule metric's count)
    MISSED = "missed"
    RECOVERED = "recovered"  #: the first success of a job after a failure noted here
    QUARANTINED = "quarantined"  #: the owner could not plan a job, or its run was poison
    AUTO_PAUSED = "auto_paused"  #: a job paused after its auto_pause_after failures
    OVERRUNNING = "overrunning"  #: a run past 2x its job's recent p99, or 90 % of its timeout
    #: a deadline passed: today a DAG task released and unclaimed past its stall SLA
    DEADLINE_MISSED = "deadline_missed"
    ALERT = "alert"  #: a Prometheus alert firing or resolved, from Alertmanager's webhook


_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$(?!\n)")


_HOST_NAME = re.compile(
    r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$"
)


def valid_host(url: str) -> bool:
    """Whether a URL's host is a DNS name or an address (``[v6]`` too), nothing else: a
    host with an encoded delimiter in it (``hooks.example.com%3Ftoken=…``) is no host."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018  (a port that is no number raises)
    except ValueError:
        return False
    if not host:
        return False
    if _HOST_NAME.match(host):
        return True
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


class Channel(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where messages go: a webhook (JSON, HMAC-signed when a secret is set) or any
    service apprise knows by URL (Slack, email, Discord, ...)."""

    kind: Literal["webhook", "apprise"]
    url: str
    secret: str | None = None  #: webhook: the HMAC-SHA256 key of its signature header
    headers: dict[str, str] = {}  #: webhook: sent with every request
    max_per_minute: int = 20  #: messages at most; beyond, matches wait and group
    max_attempts: int = 8  #: deliveries of one message before it is recorded failed
    retry_base_s: float = 2.0  #: the first retry's pause, doubling, at most 10 minutes
    timeout_s: float = 10.0

    def check(self, name: str) -> None:
        """ValidationError naming the first field that is wrong."""
        if not _NAME.match(name):
            raise ValidationError("a channel name is 1-63 of a-z 0-9 _ -", "$.name")
        if self.kind == "webhook" and not re.match(r"^https?://[^\s]+$", self.url):
            raise ValidationError("a webhook's url is http:// or https://", "$.url")
        if self.kind == "webhook" and not valid_host(self.url):
            raise ValidationError(
                "a webhook's host is a name (letters, digits, - and .) or an address", "$.url"
            )
        if self.kind == "apprise" and not re.match(r"^[a-z][a-z0-9+.-]*://\S+$", self.url):
            raise ValidationError("an apprise url is scheme://...", "$.url")
        if self.secret is not None and self.kind != "webhook":
            raise ValidationError("only a webhook signs with a secret", "$.secret")
        for header, value in self.headers.items():
            if not re.match(r"^[A-Za-z0-9-]{1,64}$", header) or "\n" in value or "\r" in value:
                raise ValidationError(f"not a header: {header!r}", "$.headers")
        if not 1 <= self.max_per_minute <= 600:
            raise ValidationError("max_per_minute is 1-600", "$.max_per_minute")
        if not 1 <= self.max_attempts <= 50:
            raise ValidationError("max_attempts is 1-50", "$.max_attempts")
        if not 0.05 <= self.retry_base_s <= 600:
            raise ValidationError("retry_base_s is 0.05-600", "$.retry_base_s")
        if not 0.1 <= self.timeout_s <= 60:
            raise ValidationError("timeout_s is 0.1-60", "$.timeout_s")

    def retry_after_s(self, attempts: int) -> float:
        """The pause after ``attempts`` failed deliveries."""
        return float(min(self.retry_base_s * 2 ** (attempts - 1), 600.0))


class Rule(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Which noted transitions go to which channels. With no job_id, dag_id or labels it
    is deployment-wide; each given narrows it."""

    events: list[Kind]
    channels: list[str]
    job_id: str | None = None
    dag_id: str | None = None  #: the DAG's own runs and its tasks'
    labels: dict[str, str] = {}  #: every one must be on the job
    group_s: float = 10.0  #: a group's first match waits this long for company
    enabled: bool = True
    description: str = ""

    def check(self) -> None:
        if not self.events:
            raise ValidationError("a rule needs at least one event kind", "$.events")
        if not self.channels:
            raise ValidationError("a rule needs at least one channel", "$.channels")
        for i, name in enumerate(self.channels):
            if not _NAME.match(name):
                raise ValidationError("not a channel name", f"$.channels[{i}]")
        if self.job_id is not None and self.dag_id is not None:
            raise ValidationError("a rule names a job or a DAG, not both", "$.dag_id")
        if self.dag_id is not None and not is_dag_id(self.dag_id):
            raise ValidationError("not a DAG id (dag_...)", "$.dag_id")
        if not 0 <= self.group_s <= 3600:
            raise ValidationError("group_s is 0-3600", "$.group_s")
        if len(self.description) > 500:
            raise ValidationError("at most 500 characters", "$.description")

    def covers(self, job_id: str, labels: dict[str, str] | None) -> bool:
        """Whether a noted transition of ``job_id`` (a run's job, a DAG's id, a DAG task's
        ``dag_x.task``) is this rule's; ``labels`` are the job's (None: unknown)."""
        if self.job_id is not None and job_id != self.job_id:
            return False
        owner = (parse_task_job_id(job_id) or (job_id,))[0]  # a task's: its DAG's
        if self.dag_id is not None and owner != self.dag_id:
            return False
        if self.labels:
            have = labels or {}
            return all(have.get(k) == v for k, v in self.labels.items())
        return True


class Noted(msgspec.Struct, frozen=True):
    """A transition worth a notification, as the event stream told it."""

    kind: Kind
    rid: str  #: the run id, a DAG run's id, or (quarantined, auto_paused) the job id
    job_id: str
    detail: str
    worker: str


def _parts(value: str) -> tuple[str, str, str, str]:
    transition, _, rest = value.partition("|")
    worker, _, detail = rest.partition("|")
    old, _, new = transition.partition(">")
    return old, new, worker, detail


def _job_of(rid: str) -> str:
    return job_of_run(rid)


def noted(events: list[tuple[str, str]]) -> tuple[list[Noted], list[tuple[str, str]]]:
    """The transitions of one stream entry (run id, ``old>new|worker|detail``) worth a
    notification, and the successes in it (job id, rid) that may be a recovery."""
    retrying = {rid for rid, value in events if value.startswith(">retrying|")}
    out: list[Noted] = []
    succeeded: list[tuple[str, str]] = []
    for rid, value in events:
        if ">succeeded|" in value:
            succeeded.append((_job_of(rid), rid))
            continue
        old, new, worker, detail = _parts(value)
        if new == "dead_letter":
            out.append(Noted(Kind.DEAD_LETTER, rid, _job_of(rid), detail, worker))
        elif new == "failed":
            attempt = attempt_of(rid)
            if not (attempt is not None and with_attempt(rid, attempt + 1) in retrying):
                out.append(Noted(Kind.FAILED, rid, _job_of(rid), detail, worker))
        elif new == old == "active" and detail.startswith("missed") and ":" not in rid:
            out.append(Noted(Kind.MISSED, rid, rid, detail, worker))
        elif new == "quarantined" and ":" not in rid:
            out.append(Noted(Kind.QUARANTINED, rid, rid, detail, worker))
        elif new == "paused" and old == "active" and ":" not in rid:
            out.append(Noted(Kind.AUTO_PAUSED, rid, rid, detail, worker))
        elif new == old == "running" and detail.startswith("overrunning"):
            out.append(Noted(Kind.OVERRUNNING, rid, _job_of(rid), detail, worker))
        elif _late(old, new, detail):
            out.append(Noted(Kind.DEADLINE_MISSED, rid, _job_of(rid), detail, worker))
        elif new == old == "active" and detail.startswith("no success") and ":" not in rid:
            out.append(Noted(Kind.DEADLINE_MISSED, rid, rid, detail, worker))
    return out, succeeded


def _late(old: str, new: str, detail: str) -> bool:
    """A DAG task past its stall SLA, or a run past its start or finish deadline."""
    stalled = new == old == "scheduled" and detail.startswith("stalled")
    return stalled or detail.startswith("deadline:")


def is_dag_run(rid: str) -> bool:
    """A DAG run's own id (``dag_x:<tick>``), not a task's run."""
    return rid.count(":") == 1 and is_dag_id(job_of_run(rid)) and dag_run_of(rid) is None
