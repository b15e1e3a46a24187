"""``shardsched status``: the one screen an operator reads first, as plain text; read
straight from Redis (``--redis``) or through the API (``--api``, the default)."""

from __future__ import annotations

import argparse
import sys

import msgspec

from shardsched.cli import style
from shardsched.cli.http import CliError, endpoint, request
from shardsched.cli.render import as_text, table
from shardsched.ops.deployment.status import ShardStatus, Status


def read_status(args: argparse.Namespace) -> Status:
    """From Redis when --redis (or SHARDSCHED_REDIS_URL) is given, else from the API."""
    if args.redis is None:
        answer = request(
            endpoint(args.api, args.token_file, getattr(args, "profile", None)),
            "GET",
            "/api/v1/status",
        )
        return msgspec.convert(answer, Status)
    import trio

    from shardsched.ops.deployment.status import status_view
    from shardsched.service import open_redis
    from shardsched.store.drive import drive_async

    async def read() -> Status:
        redis, dep = await open_redis(args.redis, args.namespace, None, size=1, wait=False)
        try:
            status: Status = await drive_async(status_view(dep), redis)
            return status
        finally:
            await redis.aclose()

    return trio.run(read)


def run_status(args: argparse.Namespace) -> int:
    """Print it; exit 1 when something is off (a shard unowned, a schedule missed, runs
    stranded), 2 when it could not be read."""
    from shardsched.store.redis import RedisConnectionError

    try:
        st = read_status(args)
    except (CliError, RedisConnectionError) as exc:
        print(f"shardsched: {exc}", file=sys.stderr)
        return 2
    output = "json" if args.json else (args.output or "table")
    if output in ("json", "yaml"):
        print(as_text(msgspec.to_builtins(st), output))
    else:
        print(render(st, args.all or output == "wide"))
    waiting = any(q.unserved and q.ready for q in st.queues)
    return 1 if st.unowned or st.missed or st.stranded or waiting else 0


def render(st: Status, everything: bool = False) -> str:
    """The one screen, plain text: the totals, the nodes, and only the workers and shards
    that are off (``everything``: all of them)."""
    lag = "-" if st.trigger_lag_p99_1m is None else f"{st.trigger_lag_p99_1m * 1000:.0f} ms"
    owned = len(st.shards) - len(st.unowned)
    lines = [
        f"shardsched status at {style.local(st.now).strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"shards {owned}/{len(st.shards)} owned"
        + (f" (UNOWNED: {', '.join(map(str, st.unowned))})" if st.unowned else "")
        + f" · nodes {len(st.nodes)} · workers {len(st.workers)}"
        + f" · slots {st.slots_free}/{st.slots} free",
        f"queue: {st.ready} ready, {st.pending} running · trigger lag p99 (1 min) {lag}"
        + f" over {st.fired_1m} runs",
        f"missed schedules {st.missed} · overrunning {st.overrunning}"
        + f" · failed runs (1 h) {st.failed_1h} · dead letters {st.dead_letter}"
        + f" · quarantined jobs {st.quarantined}"
        + f" · stranded runs {st.stranded}",
        "durable mode: "
        + (
            f"every write waits for {st.durable_replicas} replica(s), up to"
            f" {st.durable_timeout_ms} ms"
            if st.durable_replicas
            else "off"
        ),
        "",
        table(
            ["NODE", "SHARDS", "LAG_P99_1M", "FIRED_1M", "HTTP", "EXPIRES"],
            [
                [
                    n.node_id,
                    len(n.shards),
                    None if n.lag_p99_1m is None else f"{n.lag_p99_1m * 1000:.0f} ms",
                    n.fired_1m,
                    n.http,
                    style.when(n.expires_at.isoformat()),
                ]
                for n in st.nodes
            ],
        ),
    ]
    if st.supervised:
        lines += [
            "",
            table(
                ["DEV CHILD", "STATE", "PID", "RESTARTS", "LAST EXIT"],
                [
                    [c.name, c.state.upper() if c.state != "running" else c.state, c.pid,
                     c.restarts, c.last_exit]
                    for c in st.supervised
                ],
            ),
        ]  # fmt: skip
    workers = [w for w in st.workers if everything or w.draining or w.overrunning]
    if workers:
        lines += [
            "",
            table(
                ["WORKER", "SLOTS", "FREE", "RUNNING", "OVERRUNNING", "DONE", "DRAINING"],
                [
                    [
                        w.worker_id,
                        w.capacity,
                        w.capacity_free,
                        w.running,
                        w.overrunning,
                        w.completed,
                        "yes" if w.draining else "",
                    ]
                    for w in workers
                ],
            ),
        ]
    queues = [q for q in st.queues if everything or q.unserved or q.queue != "default"]
    if queues:
        lines += [
            "",
            table(
                ["QUEUE", "READY", "RUNNING", "WORKERS", "FREE SLOTS", ""],
                [
                    [q.queue, q.ready, q.running, q.workers, q.slots_free,
                     "UNSERVED: no live worker" if q.unserved else ""]
                    for q in queues
                ],
            ),
        ]  # fmt: skip
    rows = _shard_rows(st, everything)
    if rows:
        headers = ["SHARD", "OWNER", "EPOCH", "READY", "RUNNING", "OVERDUE", "DEAD", "MISSED"]
        lines += ["", table([*headers, "RECLAIMS", "STALLED"], [[a, *r] for a, r in rows])]
    else:
        lines += ["", f"every shard owned by a live node, nothing overdue ({_HINT})"]
    return "\n".join(lines)


_HINT = "status --all lists every shard and worker"


def _off(s: ShardStatus) -> bool:
    """Something to look at now: no live owner, timers overdue, dead letters, stalls."""
    return not s.live or bool(s.overdue or s.dead_letter or s.dag_stalled or s.stranded)


def _shard_rows(st: Status, everything: bool = False) -> list[tuple[str, list[object]]]:
    """The shards that are off (``everything``: all), one row per run of consecutive
    shards that read the same (``0-63`` on a quiet deployment with one node)."""
    rows: list[tuple[str, list[object]]] = []
    first = last = -1
    previous: list[object] | None = None
    for s in st.shards:
        if not (everything or _off(s)):
            continue
        row: list[object] = [
            (s.owner or "-") + ("" if s.live else " (down)"),
            s.epoch,
            s.ready,
            s.pending,
            s.overdue,
            s.dead_letter,
            s.missed,
            s.lease_reclaims,
            s.dag_stalled,
        ]
        if row == previous and s.shard == last + 1:
            last = s.shard
            continue
        if previous is not None:
            rows.append((_span(first, last), previous))
        first = last = s.shard
        previous = row
    if previous is not None:
        rows.append((_span(first, last), previous))
    return rows


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"
