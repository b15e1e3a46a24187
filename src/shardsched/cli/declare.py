"""Jobs and DAGs as files: ``shardsched apply -f FILE_OR_DIR`` makes the deployment match
what the files declare (``jobs edit`` / ``dags edit``, in :mod:`.edit`, change one in
``$EDITOR``).

A file is YAML (several documents, ``---`` between them) or JSON (an object or a list).
Each object is a job, a DAG, a named calendar or a concurrency key's limits as the API
takes it, plus ``kind`` (``job``, ``dag``, ``calendar``, ``concurrency``) and ``id`` (a
calendar's name, a key). ``apply`` puts each one (``PUT /api/v1/jobs/{id}``, …), calendars
and limits first, so the jobs that name them find them: created, updated (a job or a DAG
as a new version), or unchanged. It labels the jobs and DAGs it puts with its apply set
(``apply-set: <name>``, ``--set``), so ``--prune`` deletes exactly the jobs and DAGs of
that set that the files no longer declare, and nothing registered any other way
(calendars and limits carry no label: ``--prune`` never deletes one). ``--dry-run``
writes nothing: it shows each change as a diff, with the next fire times of what would
change. ``paused: true`` (or ``false``) on a job or DAG declares its state too: it is
paused (resumed) after it is put; left out, apply leaves the state as it finds it.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from shardsched.cli import progress, style
from shardsched.cli.definitions import (
    KINDS,
    check_id,
    current,
    normalised,
    upstreams_first,
    yaml_lines,
    yaml_module,
)
from shardsched.cli.http import CliError, Endpoint, exchange, request
from shardsched.cli.render import quoted, table
from shardsched.core.ids import dag_id_of

#: The kinds an apply file may declare ``paused: true`` (or false) of.
_PAUSABLE = ("job", "dag")
#: The apply set of an ``apply`` without ``--set`` (``--prune`` refuses to guess it).
DEFAULT_SET = "default"
#: The label ``apply`` puts on what it manages; ``--prune`` looks only at its own set's.
APPLY_SET = "apply-set"
#: What an apply's outcome is called when the API answers no ``shardsched-outcome``.
_DONE = {"create": "created", "recreate": "created", "update": "updated"}


class Declared(NamedTuple):
    """One object of the files: its kind, id, the body to PUT, and where it was written;
    ``paused``: the state a job or DAG is to be in (None: whatever it is in)."""

    kind: str
    id: str
    body: dict[str, Any]
    source: str
    paused: bool | None = None


class Change(NamedTuple):
    kind: str
    id: str
    action: str  #: create | update | unchanged | delete | pause | resume
    diff: list[str]
    body: dict[str, Any] | None
    #: after the put: "paused" or "active" (None: leave the state as it is)
    status: str | None = None


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        found = [p for p in sorted(path.rglob("*")) if p.suffix in (".yaml", ".yml", ".json")]
        if not found:
            raise CliError(f"{path}: no .yaml, .yml or .json files in it")
        return found
    if not path.exists():
        raise CliError(f"{path}: no such file or directory")
    return [path]


def _documents(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    if path.suffix == ".json":
        try:
            docs: Iterable[Any] = [json.loads(text)]
        except ValueError as exc:
            raise CliError(f"{path} is not JSON: {exc}") from None
    else:
        yaml = yaml_module()
        try:
            from shardsched.runtime import yaml12  # `on:` is a key, not True

            docs = list(yaml12.load_all(text))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise CliError(f"{path} is not YAML{where}: {problem}") from None
    n = 0
    for doc in docs:
        for item in doc if isinstance(doc, list) else [doc]:
            if item is None:
                continue
            n += 1
            yield f"{path}#{n}", item


def load(paths: Iterable[str], apply_set: str | None) -> list[Declared]:
    """Every object of the files, checked: a kind, an id, a valid body (validated here as
    the API would, so a bad file stops before anything is written)."""
    out: list[Declared] = []
    seen: dict[tuple[str, str], str] = {}
    for given in paths:
        for path in [Path("-")] if given == "-" else _files(Path(given)):
            for source, item in _documents(path):
                if not isinstance(item, dict):
                    raise CliError(f"{source}: an object (a mapping) is expected")
                body = dict(item)
                kind, any_id = body.pop("kind", None), body.pop("id", None)
                paused = body.pop("paused", None)
                if paused is not None and (not isinstance(paused, bool) or kind not in _PAUSABLE):
                    raise CliError(f"{source}: paused is true or false, on a job or a DAG")
                if kind not in KINDS:
                    raise CliError(
                        f"{source}: kind must be one of {', '.join(KINDS)}, not {kind!r}"
                    )
                if any_id is None or any_id == "":
                    raise CliError(f"{source}: every object needs an id")
                if not isinstance(any_id, str):  # id: off, id: 0123, id: 2026-01-01
                    raise CliError(
                        f"{source}: id must be text, not {any_id!r}: quote it (YAML reads"
                        " off, yes, 0123 or a date as something else)"
                    )
                check_id(kind, any_id, source)
                if kind == "dag":  # ``etl`` is stored (and answered) as ``dag_etl``
                    any_id = dag_id_of(any_id)
                if (kind, any_id) in seen:
                    raise CliError(
                        f"{source}: {kind} {any_id} is declared in {seen[kind, any_id]} too"
                    )
                seen[kind, any_id] = source
                if apply_set is not None and KINDS[kind].labelled:
                    body["labels"] = {**(body.get("labels") or {}), APPLY_SET: apply_set}
                normalised(kind, body, source, any_id)
                out.append(Declared(kind, any_id, body, source, paused))
    return out


def plan(api: Endpoint, declared: list[Declared], prune: str | None) -> list[Change]:
    """What applying would do, object by object (and, with ``prune``, what it deletes)."""
    changes = []
    order = list(KINDS)
    in_order = sorted(declared, key=lambda d: order.index(d.kind))  # what jobs name, first
    in_order = upstreams_first(in_order)
    for d in progress.track(in_order, "comparing with what is there"):
        now, view = current(api, d.kind, d.id)
        owner = ((now or {}).get("labels") or {}).get(APPLY_SET, "")
        if owner.startswith("app:"):  # an App's (core/apps.py): its deploy owns it
            raise CliError(
                f"{d.source}: {d.kind} {d.id} belongs to app {owner[4:]!r}: change it in"
                " its code and `shardsched deploy` it (apply leaves an app's own alone)"
            )
        gone = now is None and view is not None
        want = normalised(d.kind, d.body, d.source, d.id)
        action = (
            ("recreate" if gone else "create")
            if now is None
            else "unchanged"
            if now == want
            else "update"
        )
        diff = list(
            difflib.unified_diff(
                yaml_lines(now),
                yaml_lines(want),
                f"{d.kind} {d.id} (now)",
                "(declared)",
                lineterm="",
            )
        )
        status = None
        if d.paused is not None:
            status = "paused" if d.paused else "active"
            is_now = (view or {}).get("status") if now is not None else None
            if is_now == status or (is_now is None and status == "active"):
                status = None  # already so (a new object is created active)
            elif action == "unchanged":
                action = "pause" if d.paused else "resume"
        changes.append(Change(d.kind, d.id, action, diff, d.body, status))
    if prune is not None:
        declared_ids = {(d.kind, d.id) for d in declared}
        for kind, any_id in _applied(api, prune):
            if (kind, any_id) not in declared_ids:
                changes.append(Change(kind, any_id, "delete", [], None))
    return changes


def _applied(api: Endpoint, apply_set: str) -> Iterator[tuple[str, str]]:
    """The live jobs and DAGs labelled with this apply set, every page."""
    for kind, (_, plural, _, labelled) in KINDS.items():
        if not labelled:
            continue
        cursor = None
        while True:
            query = "?limit=500" + (f"&cursor={quoted(cursor)}" if cursor else "")
            page = request(api, "GET", f"/api/v1/{plural}{query}")
            for item in page[plural]:
                if (
                    item["status"] != "deleted"
                    and (item.get("labels") or {}).get(APPLY_SET) == apply_set
                ):
                    yield kind, item[f"{kind}_id"]
            cursor = page.get("next_cursor")
            if not cursor:
                break


def next_fires(api: Endpoint, body: dict[str, Any] | None, count: int = 3) -> str:
    if not body or "schedule" not in body:
        return ""
    out = request(
        api, "POST", "/api/v1/schedules/preview", {"schedule": body["schedule"], "count": count}
    )
    return ", ".join(_wall(f["local"]) for f in out["fire_times"])


def _wall(text: str) -> str:
    """A fire time on its schedule's wall clock, as people read it: 2026-12-02 03:00 CET."""
    at = style.parse(text)
    if at is None:
        return text
    zone = at.tzname() or ""
    return at.strftime("%Y-%m-%d %H:%M:%S").removesuffix(":00") + (f" {zone}" if zone else "")


def apply_changes(
    api: Endpoint, changes: list[Change], report: Callable[[Change, str, Any], None]
) -> None:
    """Put or delete each change, in order; ``report(change, outcome, version)`` each."""
    for c in progress.track(changes, "applying"):
        path = f"/api/v1/{KINDS[c.kind].plural}/{quoted(c.id)}"
        if c.action == "delete":
            view = request(api, "DELETE", path)
            report(c, "deleted", view.get("version"))
        elif c.action in ("pause", "resume"):
            view = request(api, "PATCH", path, {"status": c.status})
            report(c, "paused" if c.action == "pause" else "resumed", view.get("version"))
        elif c.action != "unchanged":
            born_paused = c.kind == "job" and c.action in ("create", "recreate")
            born_paused = born_paused and c.status == "paused"  # no tick fires before
            query = "?paused=true" if born_paused else ""
            view, headers = exchange(api, "PUT", path + query, c.body)
            outcome = headers.get("shardsched-outcome", _DONE[c.action])
            if born_paused:
                outcome += ", paused"
            elif c.status is not None:  # created or changed, then paused (or resumed)
                view = request(api, "PATCH", path, {"status": c.status})
                outcome += f", {'paused' if c.status == 'paused' else 'resumed'}"
            report(c, outcome, view.get("version"))
        else:
            report(c, "unchanged", None)


def run_apply(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    if args.no_label and args.prune:
        raise CliError("--prune finds what to delete by its label: it cannot go with --no-label")
    if args.prune and args.set is None:
        raise CliError(
            "--prune deletes what one apply set applied before and the files no longer"
            " declare: name the set with --set NAME (every apply without --set shares the"
            " set 'default', so pruning it would delete what other files declared)"
        )
    if (args.set or "").startswith("app:"):
        raise CliError(
            f"--set {args.set}: the sets app:NAME belong to apps declared in code; deploy"
            " them with `shardsched deploy MODULE:APP`"
        )
    apply_set = None if args.no_label else (args.set or DEFAULT_SET)
    declared = load(args.file, apply_set)
    prune = args.set if args.prune else None
    if prune is not None and not declared and not args.allow_empty:
        raise CliError(
            f"the files declare nothing: --prune would delete every job and DAG of set"
            f" {prune!r} (an import that failed?); --allow-empty if that is meant"
        )
    changes = plan(args.api, declared, prune)
    if args.dry_run:
        rows = [
            {
                "kind": c.kind,
                "id": c.id,
                "action": c.action,
                "diff": c.diff,
                "next_fires": next_fires(args.api, c.body) if c.action != "unchanged" else "",
            }
            for c in changes
        ]

        def show_plan(o: Any) -> str:
            lines = []
            for r in o:
                lines.append(f"{r['action']:9} {r['kind']} {r['id']}")
                lines += (
                    [f"    {line}" for line in r["diff"][2:]] if r["action"] == "update" else []
                )
                if r["next_fires"]:
                    lines.append(f"    next: {r['next_fires']}")
            counts = _counts(r["action"] for r in o)
            return "\n".join([*lines, f"(dry run: nothing written) {counts}"])

        return rows, show_plan
    done: list[dict[str, Any]] = []
    try:
        apply_changes(
            args.api,
            changes,
            lambda c, outcome, version: done.append(
                {"kind": c.kind, "id": c.id, "outcome": outcome, "version": version}
            ),
        )
    except CliError as exc:
        raise CliError(
            f"{exc} (after {_counts(d['outcome'] for d in done) or 'nothing'})"
        ) from None
    return (
        done,
        lambda o: (
            table(
                ["KIND", "ID", "OUTCOME", "VERSION"],
                [[d["kind"], d["id"], d["outcome"], d["version"]] for d in o],
            )
            + f"\n{_counts(d['outcome'] for d in o)}"
        ),
    )


def _counts(outcomes: Iterable[str]) -> str:
    tally: dict[str, int] = {}
    for outcome in outcomes:
        tally[outcome] = tally.get(outcome, 0) + 1
    return ", ".join(f"{n} {what}" for what, n in tally.items())


def add_apply_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "apply",
        parents=[common],
        help="make jobs, DAGs, calendars and limits match YAML or JSON files",
        description="Make the deployment match what YAML or JSON files declare: each job, DAG,"
        " named calendar or concurrency key's limits (with `kind` and `id`) is created,"
        " updated (a job or a DAG as a new version), or left unchanged; calendars and limits"
        " first, so the jobs that name them find them. --dry-run shows each change as a"
        " diff with its next fire times; --prune --set NAME deletes the jobs and DAGs that"
        " apply set put there and the files no longer declare (never a calendar or a limit).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-f",
        "--file",
        action="append",
        required=True,
        metavar="FILE_OR_DIR",
        help="a file, a directory of .yaml/.yml/.json files, or - for stdin (repeatable)",
    )
    p.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    p.add_argument(
        "--prune",
        action="store_true",
        help="delete this set's jobs and DAGs the files no longer declare",
    )
    p.add_argument(
        "--set",
        default=None,
        metavar="NAME",
        help="the apply set (label apply-set; default: default); --prune needs it named",
    )
    p.add_argument(
        "--allow-empty",
        action="store_true",
        help="with --prune, files that declare nothing (deleting the whole set)",
    )
    p.add_argument(
        "--no-label",
        action="store_true",
        help="do not label what is applied (then --prune cannot see it)",
    )
