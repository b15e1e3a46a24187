"""What lists show beside their rows: the latest runs of many jobs at once (a sparkline
and the last outcome: two round trips for a page of jobs), and for runs across jobs their
job's name and the tail of their output (one round trip)."""

from __future__ import annotations

from collections.abc import Sequence

from shardsched.core.instants import from_ms
from shardsched.core.models import RunState
from shardsched.core.views import Run, RunBrief
from shardsched.ops.access.teams import spec_name
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment
from shardsched.store.keys import owner_id


def recent_runs(dep: Deployment, job_ids: Sequence[str], count: int) -> Op:
    """For each job, its ``count`` newest runs (newest first) in Redis: id, state, tick."""
    if not job_ids or count <= 0:
        return [[] for _ in job_ids]
    replies = yield [
        Call(("ZREVRANGE", dep.keys_for(j).runs_of(j), 0, count - 1, "WITHSCORES")) for j in job_ids
    ]
    per_job = []
    for reply in replies:
        flat = check(reply)
        per_job.append(
            [(flat[i].decode(), int(float(flat[i + 1]))) for i in range(0, len(flat), 2)]
        )
    rids = [rid for runs in per_job for rid, _ in runs]
    states = yield [Call(("HGET", dep.keys_for(r).run(r), "st")) for r in rids] if rids else []
    state_of = {rid: check(st) for rid, st in zip(rids, states, strict=True)}
    out = []
    for runs in per_job:
        briefs = []
        for rid, tick in runs:
            st = state_of.get(rid)
            if st is None:  # left for the archive meanwhile
                continue
            briefs.append(
                RunBrief(run_id=rid, state=RunState(st.decode()), scheduled_for=from_ms(tick))
            )
        out.append(briefs)
    return out


#: The tail of a failed run's output a list shows (bytes).
TAIL_BYTES = 400


def annotate(dep: Deployment, runs: Sequence[Run], tails: bool) -> Op:
    """Give each run its job's (or DAG's) name, and with ``tails`` the last TAIL_BYTES of
    its output: what a list across jobs shows so a person can act on a row."""
    owners = sorted({owner_id(r.run_id) for r in runs})
    calls = [Call(("HGET", dep.keys_for(o).job(o), "spec")) for o in owners]
    if tails:
        calls += [
            Call(("GETRANGE", dep.keys_for(r.run_id).output(r.run_id), -TAIL_BYTES, -1))
            for r in runs
        ]
    if not calls:
        return
    replies = yield calls
    names = {
        o: spec_name(check(raw)) for o, raw in zip(owners, replies[: len(owners)], strict=True)
    }
    for i, run in enumerate(runs):
        run.job_name = names.get(owner_id(run.run_id))
        if tails:
            raw = check(replies[len(owners) + i])
            run.output_tail = raw.decode("utf-8", "replace") if raw else None
