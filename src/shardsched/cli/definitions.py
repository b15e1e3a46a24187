"""What a definition is, for the commands that treat definitions as files (``apply``,
``export``, ``jobs edit``): the kinds of object, each one's definition read back from the
API and normalised (validated, defaults omitted) so that what a file declares and what is
there compare equal when they mean the same."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from shardsched.cli.http import CliError, Endpoint, request
from shardsched.cli.render import quoted
from shardsched.core.calendars import Calendar
from shardsched.core.concurrency import LimitRequest
from shardsched.core.errors import ValidationError
from shardsched.core.events import after_order, upstream_of
from shardsched.core.models import DagSpec, JobSpec
from shardsched.core.sameness import plain


class Kind(NamedTuple):
    """What ``apply`` and ``export`` know of a kind of object."""

    spec: type[Any]  #: the body of its PUT
    plural: str  #: its path under /api/v1
    id_field: str  #: what its views call its id
    labelled: bool  #: it carries labels (an apply set, so ``--prune``; label filters)


#: In the order apply puts them: calendars and limits before the jobs that name them.
KINDS: dict[str, Kind] = {
    "calendar": Kind(Calendar, "calendars", "name", labelled=False),
    "concurrency": Kind(LimitRequest, "concurrency", "key", labelled=False),
    "job": Kind(JobSpec, "jobs", "job_id", labelled=True),
    "dag": Kind(DagSpec, "dags", "dag_id", labelled=True),
}


def yaml_module() -> Any:
    import yaml

    return yaml


def normalised(kind: str, body: dict[str, Any], source: str, any_id: str) -> dict[str, Any]:
    """The definition as the API stores it: validated, defaults omitted."""
    from shardsched.core.dag import validate_dag
    from shardsched.core.field_errors import field_error
    from shardsched.core.validation import validate_spec

    spec_type = KINDS[kind].spec
    try:
        spec = msgspec.convert(body, spec_type)
        if kind == "job":
            validate_spec(spec)
        elif kind == "dag":
            validate_dag(spec)
        elif kind == "calendar":
            spec.check(any_id)
        elif spec.limit is None and spec.rate is None:  # it would be "created" every time
            raise CliError(
                f"{source}: a concurrency object says limit, rate or both (`shardsched"
                " concurrency clear KEY` removes a key's limits)"
            )
    except msgspec.ValidationError as exc:
        err = field_error(exc, body, spec_type)  # named as the API names it
        raise CliError(f"{source}: {err.field}: {err.message}") from None
    out = plain(msgspec.json.decode(msgspec.json.encode(spec), type=spec_type))
    assert isinstance(out, dict)
    if kind == "calendar" and "dates" in out:  # a set of days: the API answers them sorted
        out["dates"] = sorted(out["dates"])
    return out


def check_id(kind: str, any_id: str, source: str) -> None:
    """CliError unless ``any_id`` can name an object of ``kind`` (a file's id is the path
    of its PUT: checked with the rest of the file, before anything is written)."""
    from shardsched.core.concurrency import check_key
    from shardsched.core.errors import ValidationError
    from shardsched.core.validation import check_dag_id, check_job_id

    check = {"job": check_job_id, "dag": check_dag_id}.get(kind)
    try:
        if check is not None:
            check(any_id)
        elif kind == "concurrency":
            check_key(any_id, "$.id")
    except ValidationError as exc:
        raise CliError(f"{source}: {exc.field}: {exc}") from None


def current(api: Endpoint, kind: str, any_id: str) -> tuple[dict[str, Any] | None, dict | None]:
    """The definition (as ``normalised`` gives it) and the whole view of what is there now;
    (None, None) when nothing is."""
    try:
        view = request(api, "GET", f"/api/v1/{KINDS[kind].plural}/{quoted(any_id)}")
    except CliError as exc:
        if str(exc).startswith("not_found"):
            return None, None
        raise
    spec = spec_of(kind, view)
    if view.get("status") == "deleted" or not spec:  # not spec: a key without own limits
        return None, view if spec else None
    return normalised(kind, spec, f"{kind} {any_id}", any_id), view


def spec_of(kind: str, view: dict[str, Any]) -> dict[str, Any]:
    """The definition's fields of an object's view (as the API answers it)."""
    fields = KINDS[kind].spec.__struct_fields__
    spec = {f: view[f] for f in fields if f in view and f != "id" and view[f] is not None}
    if kind == "job":
        spec.pop("trigger_rule", None)
    return spec


def yaml_lines(body: dict[str, Any] | None, sort_keys: bool = True) -> list[str]:
    if body is None:
        return []
    yaml = yaml_module()
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: ~10x faster
    text: str = yaml.dump(body, Dumper=dumper, sort_keys=sort_keys, allow_unicode=True)
    return text.splitlines()


def upstreams_first(declared: list[Any]) -> list[Any]:
    """Jobs and DAGs in an order where each comes after the upstreams its ``after`` rules
    name among them (files may list them in any order); a cycle among them stops the
    apply before anything is written."""
    runs = [d for d in declared if d.kind in ("job", "dag")]
    nodes = []
    for d in runs:
        rules = (d.body.get("on") or []) if isinstance(d.body.get("on"), list) else []
        ups = [
            upstream_of(r["after"]).partition(".")[0]  # a task's: its DAG's
            for r in rules
            if isinstance(r, dict) and isinstance(r.get("after"), str)
        ]
        nodes.append((d.id, ups))
    try:
        order = after_order(nodes)
    except ValidationError as exc:
        raise CliError(f"the files declare {exc.message}") from None
    rest = [d for d in declared if d.kind not in ("job", "dag")]
    return rest + [runs[i] for i in order]
