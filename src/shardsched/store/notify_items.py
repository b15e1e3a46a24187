"""What a notification message says of each match: read from the ledger when the message
is made (its job's name and labels, the run's tick, attempt, reason, exit code and the
tail of its output, a link to its page in the console)."""

from __future__ import annotations

from urllib.parse import quote

import msgspec

from shardsched.core.ids import dag_run_of, parse_run_id
from shardsched.core.instants import from_ms
from shardsched.core.notify import Kind, is_dag_run
from shardsched.core.notify_text import OUTPUT_TAIL, Item
from shardsched.store.calls import Call, Op
from shardsched.store.deployment import Deployment
from shardsched.store.keys import owner_id


class _Named(msgspec.Struct):
    name: str | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)


_named = msgspec.json.Decoder(_Named)


def items_of(matches: list[dict[str, str]]) -> list[Item]:
    """The matches (outbox fields) as items, before :func:`enrich` reads the rest."""
    items = []
    for f in matches:
        kind = f.get("n", "")
        if kind not in Kind._value2member_map_:
            continue
        rid, job_id = f.get("id", ""), f.get("j", "")
        item = Item(kind=Kind(kind), at=from_ms(int(f.get("at") or 0)), job_id=job_id)
        if kind == Kind.ALERT:  # rid: the alert's name (ops/notify/alerts.py)
            item.name, item.reason = rid, f.get("d") or None
            items.append(item)
            continue
        if rid != job_id:
            if is_dag_run(rid):
                item.dag_run_id = rid
            else:
                item.run_id = rid
                item.dag_run_id = dag_run_of(rid)
        item.reason = f.get("d") or None
        items.append(item)
    return items


def _int(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def enrich(dep: Deployment, items: list[Item], public_url: str | None) -> Op:
    """The items with what the ledger says of them (one round trip)."""
    calls: list[Call] = []
    for item in items:
        if item.kind == Kind.ALERT:
            continue
        sk = dep.keys_for(owner_id(item.job_id))
        calls.append(Call(("HGET", sk.job(owner_id(item.job_id)), "spec")))
        if item.run_id:
            calls.append(Call(("HMGET", sk.run(item.run_id), "st", "r", "x")))
            calls.append(Call(("GETRANGE", sk.output(item.run_id), -OUTPUT_TAIL, -1)))
    replies = yield calls
    at = 0
    for item in items:
        if item.kind == Kind.ALERT:
            continue
        spec = replies[at]
        at += 1
        if isinstance(spec, bytes):
            try:
                named = _named.decode(spec)
                item.name, item.labels = named.name, named.labels
            except msgspec.DecodeError:
                pass
        if item.run_id:
            run, out = replies[at], replies[at + 1]
            at += 2
            _run(item, run, out)
        item.link = _link(public_url, item)
    return items


def _run(item: Item, run: object, out: object) -> None:
    try:
        parts = parse_run_id(item.run_id or "")
    except ValueError:  # a DAG run's item: no tick of a run, no attempt
        return
    if parts.tick.isdigit():  # a run by hand's tick (m<ms>, t<n>) is no scheduled time
        item.tick = from_ms(int(parts.tick))
    item.attempt = parts.attempt
    if isinstance(run, list):
        state, reason, code = run
        item.state = state.decode() if state else None
        if reason:
            item.reason = reason.decode(errors="replace")
        item.exit_code = _int(code)
    if isinstance(out, bytes) and out:
        item.output_tail = out.decode(errors="replace")


def _link(public_url: str | None, item: Item) -> str | None:
    if not public_url:
        return None
    if item.run_id:
        return f"{public_url}/ui/#/runs/{quote(item.run_id, safe='')}"
    if item.dag_run_id:
        return f"{public_url}/ui/#/dag-runs/{quote(item.dag_run_id, safe='')}"
    return f"{public_url}/ui/#/jobs/{quote(item.job_id, safe='')}"
