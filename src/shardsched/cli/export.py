"""``shardsched export``: the jobs, DAGs, calendars and concurrency limits there are now,
as the files ``apply`` takes.

For moving a deployment's definitions elsewhere (``dev`` to production, one Redis to
another), for putting jobs made through the API or the console under ``apply`` (export,
commit, then ``apply --set NAME``), and for keeping a copy of the definitions apart from
Redis. Each object is what ``jobs get`` (``dags get``, …) shows of its definition,
normalised as ``apply`` compares it, so applying an export to the deployment it came from
changes nothing. Notification channels are left out: their URLs hold secrets.

A definition is not a state: a paused job is exported with a comment saying so, and what
``apply`` creates from it is active. DAG tasks come with their DAG, not as jobs.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from shardsched.cli import progress
from shardsched.cli.create import key_value
from shardsched.cli.declare import APPLY_SET
from shardsched.cli.definitions import KINDS, normalised, spec_of, yaml_lines
from shardsched.cli.http import CliError, Endpoint, request
from shardsched.cli.render import page_query, table


def run_export(args: argparse.Namespace) -> tuple[Any, Callable[[Any], str]]:
    labels = [(APPLY_SET, args.set)] if args.set else []
    labels += args.label or []
    kinds = [k for k in KINDS if k in (args.kind or KINDS)]
    out_dir = _empty_dir(Path(args.dir)) if args.dir else None
    as_data = out_dir is None and (args.json or args.output in ("json", "yaml"))
    objects = []
    with progress.bar("exporting") as bar:
        for kind in kinds:
            for view in _views(args.api, kind, args.name_prefix, labels):
                objects.append(_exported(kind, view, as_data))
                bar.update(len(objects), None)
    objects.sort(key=lambda o: (kinds.index(o.kind), o.id))  # diffs well in git
    if not objects:  # as kubectl says it: on stderr, so a pipe reads an empty export
        print("shardsched: nothing matched: nothing exported", file=sys.stderr)
    paused = [o for o in objects if o.status == "paused"]
    if paused:
        print(
            f"shardsched: {len(paused)} of these are paused ({_ids(paused)}): apply creates"
            " what it exports as active; pause them after it where that matters",
            file=sys.stderr,
        )
    if out_dir is None:
        return [o.body or {"id": o.id} for o in objects], lambda _: _documents(objects)
    written = [_write(out_dir, o) for o in objects]
    if not written:
        return [], lambda _: ""
    return (
        written,
        lambda rows: (
            table(["KIND", "ID", "FILE"], [[r["kind"], r["id"], r["file"]] for r in rows])
            + f"\n{len(rows)} written to {out_dir}"
        ),
    )


def _views(
    api: Endpoint, kind: str, name_prefix: str | None, labels: list[tuple[str, str]]
) -> Iterator[dict[str, Any]]:
    """The live objects of a kind that match, every page (a DAG's tasks come with it)."""
    plural = KINDS[kind].plural
    if not KINDS[kind].labelled:  # one page, no labels: a label filter matches none
        if labels:
            return
        field = KINDS[kind].id_field
        listed = request(api, "GET", f"/api/v1/{plural}")
        for view in listed["keys" if kind == "concurrency" else plural]:
            if view[field].startswith(name_prefix or "") and spec_of(kind, view):
                yield view  # (a key without limits of its own has nothing to export)
        return
    cursor = None
    while True:
        query = {
            "limit": 500,
            "cursor": cursor,
            "name_prefix": name_prefix,
            "label": ",".join(f"{k}:{v}" for k, v in labels) or None,
        }
        page = request(api, "GET", f"/api/v1/{plural}{page_query(query)}")
        for view in page[plural]:
            if view["status"] != "deleted" and not (kind == "job" and view.get("dag_id")):
                yield view
        cursor = page.get("next_cursor")
        if not cursor:
            return


class Exported(NamedTuple):
    """One object: its file's text, and its body only where JSON or YAML was asked for (at
    half a million jobs the bodies would be gigabytes)."""

    kind: str
    id: str
    status: str | None  #: a job's or a DAG's
    text: str
    body: dict[str, Any] | None


def _exported(kind: str, view: dict[str, Any], as_data: bool) -> Exported:
    """One object as ``apply`` reads it, with what the file's comment says of it."""
    any_id = view[KINDS[kind].id_field]
    spec = spec_of(kind, view)
    try:
        spec = normalised(kind, spec, f"{kind} {any_id}", any_id)
        refused = None
    except CliError as exc:  # stored before a check it now fails: exported as it is
        refused = str(exc)
    state = view.get("status")
    head = [f"# {kind} {any_id!r}"]
    if state is not None:  # a job or a DAG
        if state == "paused":
            state += f" since {view.get('paused_at') or '?'}"
            state += f" ({view['pause_reason']})" if view.get("pause_reason") else ""
        head = [f"# {kind} {any_id} {view['name']!r}: version {view['version']}, {state}"]
    if refused:
        head.append(f"# apply refuses this definition as it is: {refused}")
    lines = ["---", *(" ".join(h.splitlines()) for h in head)]  # a comment stays one line
    lines += yaml_lines({"kind": kind, "id": any_id}, sort_keys=False) + yaml_lines(spec)
    body = {"kind": kind, "id": any_id, **spec} if as_data else None
    return Exported(kind, any_id, view.get("status"), "\n".join(lines) + "\n", body)


def _documents(objects: list[Exported]) -> str:
    return "\n".join(o.text for o in objects).rstrip("\n")


def _ids(objects: list[Exported], most: int = 5) -> str:
    ids = [o.id for o in objects]
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _empty_dir(path: Path) -> Path:
    """The directory to write into: new, or else empty (an export is all of what matched,
    so what an earlier export left there would mix in)."""
    if path.exists() and not path.is_dir():
        raise CliError(f"{path} is not a directory")
    if path.exists() and any(path.iterdir()):
        raise CliError(f"{path} is not empty: export into a new or empty directory")
    return path  # made when there is something to write (a failed read leaves nothing)


def _write(root: Path, o: Exported) -> dict[str, str]:
    """One object's file: ``<plural>/<id>.yaml``, the id %-quoted where it is not a plain
    file name (a key ``tenant:acme``, or anything a hostile server might answer)."""
    name = urllib.parse.quote(o.id, safe="")
    name = "%2E" + name[1:] if name.startswith(".") else name
    path = root / KINDS[o.kind].plural / f"{name}.yaml"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(o.text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None
    return {"kind": o.kind, "id": o.id, "file": str(path)}


def add_export_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "export",
        parents=[common],
        help="jobs, DAGs, calendars and concurrency limits as files apply takes",
        description="Write the definitions of the live jobs and DAGs, the named calendars"
        " and the concurrency keys' own limits (or those matching the filters) as YAML that"
        " `shardsched apply -f` takes: to stdout, or one file each under --dir. Applied to"
        " the deployment it came from, an export changes nothing (give apply the same --set,"
        " or --no-label for what no apply set owns). A paused job is exported with a"
        " comment saying so: apply creates it active. Notification channels are left out"
        " (their URLs hold secrets).",
    )
    p.add_argument("--dir", metavar="DIR", help="one file an object under DIR (new or empty)")
    p.add_argument("--kind", choices=list(KINDS), action="append",
                   help="only objects of this kind (repeatable)")  # fmt: skip
    p.add_argument("--set", metavar="NAME",
                   help="only what this apply set applied (jobs and DAGs)")  # fmt: skip
    p.add_argument("--label", type=key_value, action="append", metavar="KEY=VALUE",
                   help="only jobs and DAGs with this label (repeat: all of them)")  # fmt: skip
    p.add_argument("--name-prefix", metavar="PREFIX",
                   help="only those whose name (a key: itself) starts so")  # fmt: skip
