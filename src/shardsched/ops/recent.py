"""The latest runs of many jobs at once, for a list's sparkline and last outcome: two
round trips for a page of jobs (each job's newest run ids, then their states)."""

from __future__ import annotations

from collections.abc import Sequence

from shardsched.core.instants import from_ms
from shardsched.core.models import RunState
from shardsched.core.views import RunBrief
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment


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
