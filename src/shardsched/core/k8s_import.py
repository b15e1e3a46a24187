"""Kubernetes CronJobs read as shardsched jobs: what ``shardsched import k8s-cronjob``
writes as apply documents, and every field it cannot translate, with why.

Translated: ``schedule`` (``@hourly`` and the like included) on ``timeZone`` (else UTC,
as most clusters' controllers run), ``concurrencyPolicy`` (Allow, Forbid, Replace: the
same three overlaps), ``startingDeadlineSeconds`` (a start deadline), ``suspend`` (the
job declared paused), the job template's ``backoffLimit`` (attempts: one more than it)
and ``activeDeadlineSeconds`` (the run's timeout), and the one container's
``command`` + ``args`` (run as that command line, quoted) with its plain ``env`` values.
Said as untranslatable: an image (a worker runs commands on its host: the CronJob's image
is not pulled), a pod of several containers, env from secrets or config maps, a
container with no command (the image's entrypoint is unknown here), the history limits.

Pure: documents (as YAML gives them) in, apply documents and warnings out.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from shardsched.core.crontab_import import Imported, env_refused, invalid
from shardsched.core.durations import parse_duration

_OVERLAP = {"Allow": "allow", "Forbid": "forbid", "Replace": "replace"}
_SLUG = re.compile(r"[^a-z0-9-]+")


def read_cronjobs(documents: list[Any], source: str) -> Imported:
    """The CronJobs among ``documents`` (other kinds are passed over, said once each)."""
    out = Imported()
    for n, doc in enumerate(documents, start=1):
        if not isinstance(doc, dict):
            continue
        meta = doc.get("metadata") or {}
        name = str(meta.get("name") or f"cronjob-{n}")
        where = f"{source}#{n} ({name})"
        if doc.get("kind") == "List":
            items = read_cronjobs(list(doc.get("items") or []), f"{source}#{n}")
            out.documents += items.documents
            out.warnings += items.warnings
            continue
        if doc.get("kind") != "CronJob":
            out.warnings.append(f"{where}: a {doc.get('kind')!r}, not a CronJob: passed over")
            continue
        document = _job(doc, name, str(meta.get("namespace") or "default"), where, out.warnings)
        if document is None:
            continue
        problem = invalid(document)
        if problem is not None:
            out.warnings.append(f"{where}: not translated: {problem}")
            continue
        out.documents.append(document)
    return out


def _env(container: dict[str, Any], where: str, warnings: list[str]) -> dict[str, str]:
    """The container's plain env values; one from a secret, or a name a job may not set,
    is said and left out (the job stays)."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        name = str((entry or {}).get("name"))
        if "value" in entry and "valueFrom" not in entry:
            why = env_refused(name, str(entry["value"]))
            if why is None:
                env[name] = str(entry["value"])
            else:
                warnings.append(f"{where}: env {name} is not kept: {why}")
        else:
            warnings.append(
                f"{where}: env {name} comes from a secret or a config map: not translated"
                " (set it in the worker's environment)"
            )
    return env


#: ``$(VAR)`` in a container's command and args: Kubernetes puts the container's env
#: value there (``$$`` is a literal ``$``; an unknown name stays as written).
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expanded(word: str, env: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(one, word)


def _job(
    doc: dict[str, Any], name: str, namespace: str, where: str, warnings: list[str]
) -> dict[str, Any] | None:
    spec = doc.get("spec") or {}
    template = (spec.get("jobTemplate") or {}).get("spec") or {}
    pod = (template.get("template") or {}).get("spec") or {}
    containers = pod.get("containers") or []
    if len(containers) != 1:
        warnings.append(
            f"{where}: not translated: a pod of {len(containers)} containers (one command"
            " a job: import each as its own)"
        )
        return None
    container = containers[0]
    words = list(container.get("command") or []) + list(container.get("args") or [])
    if any(not isinstance(w, str | int | float) or isinstance(w, bool) for w in words):
        warnings.append(
            f"{where}: not translated: command and args are lists of strings (Kubernetes"
            " refuses this manifest)"
        )
        return None
    if not container.get("command"):
        warnings.append(
            f"{where}: not translated: the container has no command (it runs its image's"
            " entrypoint, which is not known here): give the CronJob a command"
        )
        return None
    schedule = str(spec.get("schedule") or "")
    zone = spec.get("timeZone")
    if zone is not None and (not isinstance(zone, str) or not zone):
        warnings.append(f"{where}: not translated: timeZone {zone!r} is not a zone's name")
        return None
    zone = zone or "UTC"
    if schedule.startswith(("TZ=", "CRON_TZ=")):  # the old, unsupported way to say a zone
        prefix, _, schedule = schedule.partition(" ")
        zone = prefix.split("=", 1)[1]
    env = _env(container, where, warnings)
    argv = [_expanded(str(w), env) for w in words]
    every = schedule.strip()
    when: dict[str, Any] = {"type": "cron", "expression": schedule, "timezone": zone}
    if every.startswith("@every "):  # robfig/cron's, which Kubernetes parses with
        try:
            when = {"type": "interval", "every_s": parse_duration(every[7:])}
        except ValueError as exc:
            warnings.append(f"{where}: not translated: {exc}")
            return None
    document: dict[str, Any] = {
        "kind": "job",
        "id": _SLUG.sub("-", f"{namespace}-{name}".lower()).strip("-")[:100],
        "name": f"{namespace}/{name}",
        "schedule": when,
        "command": shlex.join(argv),
        "labels": {"k8s-namespace": namespace[:63]},
    }
    policy = spec.get("concurrencyPolicy")
    if policy is not None:
        if policy not in _OVERLAP:
            warnings.append(
                f"{where}: concurrencyPolicy {policy!r} is not Allow, Forbid or Replace"
            )
        else:
            document["overlap"] = _OVERLAP[policy]
    if spec.get("startingDeadlineSeconds") is not None:
        document["start_deadline_s"] = float(spec["startingDeadlineSeconds"])
    suspend = spec.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        warnings.append(f"{where}: not translated: suspend {suspend!r} is not true or false")
        return None
    if suspend:
        document["paused"] = True
    if template.get("backoffLimit") is not None:
        document["retry_policy"] = {"max_attempts": int(template["backoffLimit"]) + 1}
    if template.get("activeDeadlineSeconds") is not None:
        document["timeout_s"] = float(template["activeDeadlineSeconds"])
    if container.get("envFrom"):
        warnings.append(f"{where}: envFrom is not translated (set it in the worker's environment)")
    if env:
        document["env"] = env
    warnings.append(
        f"{where}: the image {container.get('image')!r} is not pulled: a worker runs the"
        " command on its own host, which must have what the image had"
    )
    for limit in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        if limit in spec:
            warnings.append(f"{where}: {limit} is not translated (runs are kept by retention)")
    return document
