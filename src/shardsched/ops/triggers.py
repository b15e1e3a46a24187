"""Jobs that run after another job's, task's or DAG run's outcome (``on: [{after:
...}]``, core/events.py): the upstream checked to exist, the chain checked for a cycle
(refused, naming the path), and the upstream marked so its firings' outcomes are noted
for its owner (``ds`` on its hash, read by lua/lib/outcomes.lua) and indexed
(``{g}:after:<upstream>``: the jobs that may run after it).

An upstream that exists is marked before the job that runs after it is written, so no
outcome of it can pass unnoticed once the job is there; one made in the same batch is
marked right after the batch is registered (it has had no firing yet).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from shardsched.core.errors import ConflictError, ValidationError
from shardsched.core.events import SELECTOR, OnRule, selects, upstream_of
from shardsched.store.calls import Call, Op, check
from shardsched.store.deployment import Deployment


class _Rules(msgspec.Struct):
    on: list[OnRule] = msgspec.field(default_factory=list)


class _Labels(msgspec.Struct):
    labels: dict[str, str] = msgspec.field(default_factory=dict)


_rules_decoder = msgspec.json.Decoder(_Rules)
_labels_decoder = msgspec.json.Decoder(_Labels)


def upstreams(rules: Sequence[OnRule]) -> list[str]:
    return sorted({upstream_of(r.after) for r in rules if r.after is not None})


def marks(dep: Deployment, job_id: str, ups: Sequence[str]) -> list[Call]:
    """Mark each upstream and index ``job_id`` as running after it (a selector: indexed,
    its jobs marked by :func:`mark_selected`)."""
    calls = []
    for up in ups:
        calls.append(Call(("SADD", dep.globals.after(up), job_id)))
        if is_selector(up):
            calls.append(Call(("SADD", dep.globals.selectors, up)))
        else:
            calls.append(Call(("HSET", dep.keys_for(up).job(up), "ds", "1")))
    return calls


#: Jobs a selector's first marking reads a round trip, per shard.
SCAN_CHUNK = 500


def mark_selected(dep: Deployment, downstream: str, selectors: Sequence[str]) -> Op:
    """Every job there is that ``selectors`` name, marked and indexed as ``downstream``'s
    upstream: the jobs made later are marked as they are made (:func:`join_selectors`).
    Reads every job's labels once (a selector is declared rarely)."""
    if not selectors:
        return
    for shard in range(dep.n_shards):
        sk = dep.shard(shard)
        start = 0
        while True:
            (ids,) = yield [Call(("ZRANGE", sk.jobs, start, start + SCAN_CHUNK - 1))]
            ids = [i.decode() for i in check(ids)]
            if not ids:
                break
            specs = yield [Call(("HGET", sk.job(i), "spec")) for i in ids]
            calls = []
            for job_id, raw in zip(ids, specs, strict=True):
                labels = _labels_decoder.decode(raw).labels if check(raw) else {}
                if job_id != downstream and any(selects(sel, labels) for sel in selectors):
                    calls += [
                        Call(("SADD", dep.globals.after(job_id), downstream)),
                        Call(("HSET", sk.job(job_id), "ds", "1")),
                    ]
            if calls:
                yield calls
            start += SCAN_CHUNK


def join_selectors(
    dep: Deployment, selectors: Any, jobs: Sequence[tuple[str, dict[str, str]]]
) -> Op:
    """Jobs just written (id, labels) that a declared selector names (``selectors``: the
    SMEMBERS reply of them, read in the write's round trip) marked and indexed as the
    upstreams of the jobs that run after the selector."""
    chosen = [s.decode() for s in (check(selectors) or [])]
    matched = [(j, sel) for j, labels in jobs for sel in chosen if selects(sel, labels)]
    if not matched:
        return
    sels = sorted({sel for _j, sel in matched})
    replies = yield [Call(("SMEMBERS", dep.globals.after(sel))) for sel in sels]
    downs = {sel: [d.decode() for d in check(r)] for sel, r in zip(sels, replies, strict=True)}
    calls = []
    for job_id, sel in matched:
        for down in downs[sel]:
            if down != job_id:
                calls.append(Call(("SADD", dep.globals.after(job_id), down)))
        if downs[sel]:
            calls.append(Call(("HSET", dep.keys_for(job_id).job(job_id), "ds", "1")))
    if calls:
        yield calls


def unmarks(dep: Deployment, job_id: str, ups: Sequence[str]) -> list[Call]:
    """``job_id`` runs after these no more (the upstream's mark stays: harmless, one
    entry a firing on a list its owner empties)."""
    return [Call(("SREM", dep.globals.after(up), job_id)) for up in ups]


def check_chain(
    dep: Deployment,
    declared: dict[str, list[OnRule]],
    alongside: frozenset[str] = frozenset(),
    labels_of: dict[str, dict[str, str]] | None = None,
) -> Op:
    """Refuse (ValidationError naming the rule) an upstream that neither exists nor is
    declared alongside (``alongside``: the ids written in the same batch), and a cycle
    (naming its path; a job a selector of its own names is one: ``labels_of``, the
    declared ones' labels); returns the upstreams that exist (marked before the write)
    and those declared alongside (marked after it). A selector (``labels:…``) is never
    looked for: it names the jobs that match it, now and later."""
    labels_of = labels_of or {}
    for any_id, rules in declared.items():
        for i, rule in enumerate(rules):
            if rule.after and selects(upstream_of(rule.after), labels_of.get(any_id, {})):
                raise ValidationError(
                    f"a cycle: {any_id} runs after {rule.after}, which it is itself",
                    f"$.on[{i}].after",
                )
    wanted = sorted(
        {up for rules in declared.values() for up in upstreams(rules) if not is_selector(up)}
    )
    if not wanted:
        return [], []
    specs = yield [Call(("HMGET", dep.keys_for(u).job(u), "spec", "status")) for u in wanted]
    existing: dict[str, list[OnRule]] = {}
    for up, reply in zip(wanted, specs, strict=True):
        spec, _status = check(reply)
        if spec is not None:  # a job (deleted too: it may come back), a task, a DAG
            existing[up] = _rules_decoder.decode(spec).on
    for rules in declared.values():
        for i, rule in enumerate(rules):
            if rule.after is None:
                continue
            up = upstream_of(rule.after)
            if is_selector(up):
                continue
            if up not in existing and up not in declared and up not in alongside:
                raise ValidationError(
                    f"{rule.after}: there is no such job, task or DAG to run after",
                    f"$.on[{i}].after",
                )
    graph: dict[str, list[str]] = {
        node: _edges(node, rules) for node, rules in {**existing, **declared}.items()
    }
    yield from _walk(dep, graph, declared)
    before = [u for u in wanted if u in existing]
    return before, [u for u in wanted if u not in existing]


def _walk(dep: Deployment, graph: dict[str, list[str]], declared: dict[str, list[OnRule]]) -> Op:
    """Follow each declared job's upstreams (reading definitions not yet known) and
    refuse a path that comes back to it."""
    frontier = [u for ups in graph.values() for u in ups if u not in graph]
    while frontier:
        unknown = sorted(set(frontier))
        replies = yield [Call(("HGET", dep.keys_for(u).job(u), "spec")) for u in unknown]
        for up, raw in zip(unknown, replies, strict=True):
            spec = check(raw)
            graph[up] = _edges(up, _rules_decoder.decode(spec).on if spec else [])
        frontier = [u for node in unknown for u in graph[node] if u not in graph]
    for start in declared:
        path = _cycle(graph, start)
        if path:
            said = " runs after ".join(path)
            raise ValidationError(f"a cycle: {said}", "$.on")


def is_selector(up: str) -> bool:
    return up.startswith(SELECTOR)


def _edges(node: str, rules: Sequence[OnRule]) -> list[str]:
    """What ``node`` runs after: a DAG task runs when its DAG runs, so after whatever its
    DAG runs after (a job after ``task:etl.a`` while ``etl`` runs after that job is a
    cycle); anything else, its own rules' upstreams."""
    dag, dot, _task = node.partition(".")
    if dot and dag.startswith("dag_"):
        return [dag]
    return [up for up in upstreams(rules) if not is_selector(up)]  # a selector: a leaf


def _cycle(graph: dict[str, list[str]], start: str) -> list[str] | None:
    """A path start → … → start along the upstream edges, if there is one."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for up in graph.get(node, []):
            if up == start:
                return [*path, start]
            if up not in seen:
                seen.add(up)
                stack.append((up, [*path, up]))
    return None


def declare(dep: Deployment, any_id: str, rules: Sequence[OnRule]) -> Op:
    """Before a job or DAG ``any_id`` is written with ``rules``: its upstreams checked
    (ValidationError) and marked, and it indexed as a listener of its events."""
    ups = upstreams(rules)
    if ups:
        yield from check_chain(dep, {any_id: list(rules)})
    events = sorted({r.event for r in rules if r.event is not None})
    calls = marks(dep, any_id, ups) + [
        Call(("SADD", dep.globals.listeners(e), any_id)) for e in events
    ]
    if calls:
        yield calls
    yield from mark_selected(dep, any_id, [up for up in ups if is_selector(up)])


def retract(dep: Deployment, any_id: str, old: Sequence[OnRule], new: Sequence[OnRule]) -> Op:
    """After a write: ``any_id`` out of the indexes of what ``old`` had and ``new`` has
    not (a delete: ``new`` empty)."""
    gone_ups = sorted(set(upstreams(old)) - set(upstreams(new)))
    gone_events = {r.event for r in old if r.event} - {r.event for r in new if r.event}
    calls = unmarks(dep, any_id, gone_ups) + [
        Call(("SREM", dep.globals.listeners(e), any_id)) for e in sorted(gone_events)
    ]
    if calls:
        yield calls


#: A definition with ``after`` rules is checked for a cycle and written holding this lock,
#: so two written at once cannot each pass the check and together close a cycle. Held
#: milliseconds; its expiry frees it from a writer that died holding it.
LOCK_MS = 5000
LOCK_TRIES = 3000


def locked(dep: Deployment, op: Op) -> Op:
    """``op`` run holding the deployment's lock of ``after`` chains (tried LOCK_TRIES times,
    a round trip each; then ConflictError, to be tried again)."""
    key = dep.globals.after_lock
    for _ in range(LOCK_TRIES):
        (took,) = yield [Call(("SET", key, "1", "NX", "PX", LOCK_MS))]
        if check(took):
            break
    else:
        raise ConflictError("other definitions with `after` rules are being written: try again")
    try:
        return (yield from op)
    finally:
        yield [Call(("DEL", key))]
