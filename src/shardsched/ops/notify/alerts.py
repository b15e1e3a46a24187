"""Prometheus alerts into notifications: Alertmanager's webhook (``webhook_configs``)
posts its alerts here, and each rule listening for ``alert`` sends them over its channels
with the rest (grouped, rate limited, signed, retried, recorded). So the deployment-wide
alerts of deploy/prometheus (an unowned shard, trigger lag, Redis errors) reach the same
channels as a job's failures, with no second notification system to run.

An alert is keyed by its fingerprint, start and status: Alertmanager's repeats of a
firing alert add nothing; its resolution is a message of its own.
"""

from __future__ import annotations

import msgspec

from shardsched.core.notify import Kind, Rule
from shardsched.store.calls import Call, Op, check, server_ms
from shardsched.store.deployment import Deployment
from shardsched.store.lua import notify as lua

_rule = msgspec.json.Decoder(Rule)


class AmAlert(msgspec.Struct):
    """One alert as Alertmanager's webhook sends it (the fields used here)."""

    status: str = "firing"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    startsAt: str = ""  # Alertmanager's name for it
    fingerprint: str = ""


class AmPayload(msgspec.Struct):
    """Alertmanager's webhook body (version 4); its other fields are not read."""

    alerts: list[AmAlert]


class AlertsTaken(msgspec.Struct, kw_only=True):
    received: int  #: alerts in the payload
    noted: int  #: matches put on the outbox (one per rule and channel, repeats not)


def take_alerts(dep: Deployment, payload: AmPayload) -> Op:
    """Put each alert on the outbox for every enabled rule listening for ``alert`` whose
    scope its labels meet (a rule's job_id against the alert's ``job_id`` label)."""
    raw, now = yield [Call(("HGETALL", dep.globals.notify.rules)), Call(("TIME",))]
    rules = []
    for i in range(0, len(check(raw)), 2):
        try:
            rule = _rule.decode(raw[i + 1])
        except msgspec.DecodeError:
            continue
        if rule.enabled and Kind.ALERT in rule.events:
            rules.append((raw[i].decode(), rule))
    at = str(server_ms(check(now)))
    matches: list[tuple[str, ...]] = []
    for alert in payload.alerts[:1000]:
        name = alert.labels.get("alertname", "alert")
        job_id = alert.labels.get("job_id") or alert.labels.get("dag_id") or name
        summary = alert.annotations.get("summary") or alert.annotations.get("description", "")
        detail = f"{alert.status}: {name}" + (f": {summary}" if summary else "")
        for rule_id, rule in rules:
            if not rule.covers(job_id, alert.labels):
                continue
            for channel in rule.channels:
                key = f"am:{alert.fingerprint}:{alert.startsAt}:{alert.status}:{rule_id}:{channel}"
                matches.append(
                    (key, rule_id, channel, Kind.ALERT, name, job_id, at, detail[:500], "")
                )
    noted = 0
    for i in range(0, len(matches), 500):
        (added,) = yield [lua.notify_enqueue(dep.globals, matches[i : i + 500])]
        noted += int(check(added))
    return AlertsTaken(received=len(payload.alerts), noted=noted)
