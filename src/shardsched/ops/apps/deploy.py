"""Deploy an app (core/apps.py): make the service match the jobs and DAGs it declares,
within the app's own apply set only.

Each declared job or DAG is created, changed (a new version: the very ``put_job`` /
``put_dag`` of ``PUT``, so its pause state, its history and, when its schedule did not
change, its next fire stay), or left unchanged; each live job or DAG labelled with the
app's set that the app no longer declares is pruned (deleted: its history stays). An id
that exists outside the set is refused (:class:`NotOwned`) and nothing is written.

Two deploys of one app racing end in the newer one's definitions, never a mix. "Newer"
is the later to claim a generation: INCR of the app's generation key on the Redis server
(one clock, one order), not a client's clock or a code version. A deploy announces its
generation on every shard before it reads anything (lua/announce_deploy.lua), and every
write it makes goes through a fenced script that refuses it once a later generation is
announced on that shard (store/lua/apps.fenced). So what an earlier deploy wrote before
the later one's announcement is what the later one reads and corrects, and nothing the
earlier one tries after it lands: it stops with :class:`Superseded`. A deploy that dies
midway leaves what it wrote so far; deploying again completes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from shardsched.core.app_sets import APPLY_SET, apply_set_of, check_app_name
from shardsched.core.deploys import DeployChange, DeployResult
from shardsched.core.errors import NotOwned, Superseded, ValidationError
from shardsched.core.events import after_order, upstream_of
from shardsched.core.ids import dag_id_of
from shardsched.core.models import DagSpec, JobSpec, JobStatus
from shardsched.core.sameness import plain, same_definition
from shardsched.core.validation import (
    check_dag_id,
    check_job_id,
    validate_schedule,
    validate_spec,
)
from shardsched.ops.dags import manage
from shardsched.ops.jobs.actions import delete_job
from shardsched.ops.jobs.declare import put_dag, put_job
from shardsched.ops.listing import dags_page, jobs_page
from shardsched.ops.pagination import parse_cursor
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.lua import apps as apps_lua

#: Declarations one deploy takes at most (jobs and DAGs together).
MAX_DECLARED = 5000

_job_spec = msgspec.json.Decoder(JobSpec)
_dag_spec = msgspec.json.Decoder(DagSpec)


def _labelled(app: str, labels: dict[str, str], where: str) -> dict[str, str]:
    """The labels with the app's set; another set's label is refused."""
    own = apply_set_of(app)
    if labels.get(APPLY_SET, own) != own:
        raise ValidationError(
            f"{where}: labelled {APPLY_SET}={labels[APPLY_SET]!r}, not the app's {own!r}",
            f"{where}.labels",
        )
    return {**labels, APPLY_SET: own}


def declared(
    app: str, jobs: dict[str, JobSpec], dags: dict[str, DagSpec]
) -> tuple[dict[str, JobSpec], dict[str, DagSpec]]:
    """The declarations checked (ids, sizes) and labelled with the app's set; DAG ids
    as stored (``dag_<id>``)."""
    check_app_name(app)
    if len(jobs) + len(dags) > MAX_DECLARED:
        raise ValidationError(f"a deploy declares at most {MAX_DECLARED} jobs and DAGs", "$")
    out_jobs, out_dags = {}, {}
    for job_id, spec in jobs.items():
        check_job_id(job_id)
        where = f"$.jobs.{job_id}"
        if spec.depends_on:
            raise ValidationError("a DAG's tasks are declared with their DAG", where)
        labels = _labelled(app, spec.labels, where)
        out_jobs[job_id] = msgspec.structs.replace(spec, id=None, labels=labels)
        _checked(where, validate_spec, out_jobs[job_id])
    for any_id, dag in dags.items():
        check_dag_id(any_id)
        dag_id = dag_id_of(any_id)
        if dag_id in out_dags:
            raise ValidationError(f"DAG {dag_id!r} is declared twice", f"$.dags.{any_id}")
        labels = _labelled(app, dag.labels, f"$.dags.{any_id}")
        out_dags[dag_id] = msgspec.structs.replace(dag, id=None, labels=labels)
        _checked(f"$.dags.{any_id}", _check_dag, out_dags[dag_id])
    return out_jobs, out_dags


def _checked(where: str, check_one: Any, spec: Any) -> None:
    """``check_one(spec)``, its ValidationError naming the declaration: every declaration
    is checked as its put would check it before anything is written (or claimed)."""
    try:
        check_one(spec)
    except ValidationError as exc:
        field = exc.field or "$"
        raise ValidationError(f"{where}: {exc.message}", where + field.removeprefix("$")) from None


def _check_dag(dag: DagSpec) -> None:
    validate_schedule(dag.schedule)
    manage.task_items(dag)


def _claim(dep: Deployment, app: str) -> Op:
    """A generation for this deploy, announced on every shard; Superseded if a later
    one was announced first somewhere. A shard's fence above every generation claimed
    (the counter lost: a Redis restarted without its data, a cluster node replaced) would
    refuse every deploy from then on: the counter is moved past it and the claim made
    again."""
    counter = dep.globals.app_generation(app)
    shards = [dep.shard(s) for s in range(dep.n_shards)]
    for _attempt in range(3):
        (generation,) = yield [Call(("INCR", counter))]
        generation = int(check(generation))
        replies = yield [apps_lua.announce_deploy(sk, app, generation) for sk in shards]
        newest = max(apps_lua.decode_announced(r) for r in replies)
        if newest <= generation:
            return generation
        (claimed,) = yield [Call(("GET", counter))]
        if int(check(claimed) or 0) >= newest:  # a later deploy claimed it: it wins
            raise Superseded(app, generation, newest)
        yield [Call(("SET", counter, newest))]  # a lost counter: past every fence
    raise Superseded(app, generation, newest)


def _owned(dep: Deployment, app: str, within: tuple[str, ...]) -> Op:
    """The live jobs and DAGs labelled with the app's set: {id: kind}."""
    labels = {APPLY_SET: apply_set_of(app)}
    found: dict[str, str] = {}
    cursor = None
    while True:
        jobs = yield from jobs_page(dep, 1000, cursor, within=within, labels=labels)
        found.update((j.job_id, "job") for j in jobs.jobs if j.dag_id is None)
        if jobs.next_cursor is None:
            break
        cursor = parse_cursor(jobs.next_cursor)
    cursor = None
    while True:
        page = yield from dags_page(dep, 1000, cursor, within=within, labels=labels)
        found.update((d.dag_id, "dag") for d in page.dags)
        if page.next_cursor is None:
            break
        cursor = parse_cursor(page.next_cursor)
    return found


def _current(dep: Deployment, ids: list[str]) -> Op:
    """{id: (status, stored spec JSON)} of each id that exists (a DAG's task: None)."""
    if not ids:
        return {}
    calls = [Call(("HMGET", dep.keys_for(i).job(i), "status", "spec", "dag")) for i in ids]
    replies = yield calls
    out = {}
    for any_id, reply in zip(ids, replies, strict=True):
        status, spec, dag = check(reply)
        if spec is not None and dag is None:
            out[any_id] = ((status or b"active").decode(), spec)
    return out


def _changes(
    app: str,
    jobs: dict[str, JobSpec],
    dags: dict[str, DagSpec],
    current: dict[str, tuple[str, bytes]],
    owned: dict[str, str],
) -> Iterator[DeployChange]:
    own = apply_set_of(app)
    for kind, wanted in (("job", jobs), ("dag", dags)):
        for any_id, spec in wanted.items():
            status, raw = current.get(any_id, ("", b""))
            if not raw or status == JobStatus.DELETED:
                yield DeployChange(kind, any_id, "created", after=_plain(spec))
                continue
            now = (_job_spec if kind == "job" else _dag_spec).decode(raw)
            owner = now.labels.get(APPLY_SET, "")
            if owner != own:
                raise NotOwned(app, any_id, owner)
            same = same_definition(now, spec)
            yield DeployChange(
                kind, any_id, "unchanged" if same else "changed", None, _plain(now),
                None if same else _plain(spec),
            )  # fmt: skip
    for any_id, kind in sorted(owned.items()):
        if any_id not in jobs and any_id not in dags:
            yield DeployChange(kind, any_id, "pruned")


def _upstreams_first(
    changes: list[DeployChange], jobs: dict[str, JobSpec], dags: dict[str, DagSpec]
) -> list[DeployChange]:
    """The changes in an order where a job or DAG comes after the upstreams its ``after``
    rules name among them (ValidationError for a cycle among them: nothing written)."""
    writes = [c for c in changes if c.action != "pruned"]
    nodes = []
    for c in writes:
        spec = jobs[c.id] if c.kind == "job" else dags[c.id]
        ups = [upstream_of(r.after).partition(".")[0] for r in spec.on if r.after]
        nodes.append((c.id, ups))
    order = after_order(nodes)
    return [writes[i] for i in order] + [c for c in changes if c.action == "pruned"]


def _plain(spec: Any) -> dict[str, Any]:
    out = plain(spec)
    assert isinstance(out, dict)
    return out


def deploy_app(
    dep: Deployment,
    app: str,
    jobs: dict[str, JobSpec],
    dags: dict[str, DagSpec],
    dry_run: bool = False,
    actor: str = "sdk",
    within: tuple[str, ...] = (),
) -> Op:
    """Make the service match what ``app`` declares (see the module); returns a
    DeployResult listing every change with its outcome, or, with ``dry_run``, what would
    change (nothing written, no generation claimed). ``within``: a team's name prefixes
    (it prunes only what it sees)."""
    jobs, dags = declared(app, jobs, dags)
    generation = None if dry_run else (yield from _claim(dep, app))
    owned = yield from _owned(dep, app, within)
    current = yield from _current(dep, sorted({*jobs, *dags, *owned}))
    changes = _upstreams_first(list(_changes(app, jobs, dags, current, owned)), jobs, dags)
    if generation is None:
        return DeployResult(app, True, None, changes)
    done = []
    for change in changes:
        if change.action == "unchanged":
            done.append(change)
            continue
        op: Op
        if change.action == "pruned":
            op = (delete_job if change.kind == "job" else manage.delete_dag)(dep, change.id, actor)
        elif change.kind == "job":
            op = put_job(dep, change.id, jobs[change.id], None, actor, apply_set_of(app))
        else:
            op = put_dag(dep, change.id, dags[change.id], None, actor, apply_set_of(app))
        result = yield from apps_lua.fenced(op, app, generation)
        view = result[0] if isinstance(result, tuple) else result
        done.append(msgspec.structs.replace(change, version=view.version))
    return DeployResult(app, False, generation, done)
