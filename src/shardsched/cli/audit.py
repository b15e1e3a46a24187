"""``shardsched audit``: the audit report for operators (table) and scripts (--json),
read straight from Redis (``--redis``) or through the API (``--api``, the default)."""

from __future__ import annotations

import argparse
import sys

import msgspec
import trio

from shardsched import ops
from shardsched.cli.http import CliError, endpoint, request
from shardsched.cli.render import as_text, page_query
from shardsched.ops.history import audit
from shardsched.store.drive import drive_async
from shardsched.store.redis import RedisError, connect


async def _report(args: argparse.Namespace) -> audit.AuditReport:
    redis = connect(args.redis, size=2, retry_for=5)
    try:
        dep = await drive_async(ops.open_deployment(args.namespace, None), redis)
        op = audit.audit(
            dep,
            args.settle,
            args.late_after,
            stranded_after_s=args.stranded_after,
            reference=args.reference,
        )
        return await drive_async(op, redis)
    finally:
        await redis.aclose()


def format_report(r: audit.AuditReport) -> str:
    lag = r.lag_s
    lines = [
        f"audit up to {r.horizon.isoformat()} over {r.jobs} jobs",
        f"  expected   {r.expected}",
        f"  fired      {r.fired}",
        f"  skipped    {r.skipped}  {r.skipped_by_reason or ''}".rstrip(),
        f"  pending    {r.pending}  (due, durable, not fired yet)",
        f"  missing    {r.missing}",
        f"  duplicated {r.duplicated}",
        f"  unexpected {r.unexpected}",
        f"  late       {r.late}  (later than {r.late_after_s} s)",
        f"  lag s      p50 {lag.p50}  p90 {lag.p90}  p99 {lag.p99}  max {lag.max}",
        "  runs       "
        + ("  ".join(f"{name} {n}" for name, n in r.executions.items()) or "none fired"),
    ]
    if r.events.get("received"):
        lines.append(
            f"  events     received {r.events['received']}  pending {r.events['pending']}"
            f"  unsettled {r.events['unsettled']}"
        )
    if r.events.get("unsettled"):
        lines.append(f"  ! {r.events['unsettled']} events with no outcome past a minute")
    if r.stranded:
        lines.append(
            f"  ! {r.stranded} stranded (fired, not running anywhere): "
            + ", ".join(r.stranded_runs[:5])
        )
    if r.quarantined:
        lines.append(
            f"  quarantined {len(r.quarantined)}  (paused: could not be planned) "
            f"{', '.join(r.quarantined[:5])}"
        )
    if r.unplannable:
        lines.append(f"  unplannable {len(r.unplannable)}  {', '.join(r.unplannable[:5])}")
    for job in r.problem_jobs[:10]:
        ticks = ", ".join(f"{p.tick.isoformat()} {p.outcome}" for p in job.problems[:5])
        lines.append(f"  ! {job.job_id}: {ticks}")
    lines.append("OK" if r.ok else "PROBLEMS FOUND")
    return "\n".join(lines)


def run_audit(args: argparse.Namespace) -> int:
    """From Redis when --redis (or SHARDSCHED_REDIS_URL) is given, else through the API."""
    try:
        if args.redis is None:
            query = page_query(
                {
                    "settle_s": args.settle,
                    "late_after_s": args.late_after,
                    "stranded_after_s": args.stranded_after,
                    "reference": "true" if args.reference else None,
                }
            )
            answer = request(
                endpoint(args.api, args.token_file, getattr(args, "profile", None)),
                "GET",
                "/api/v1/audit" + query,
            )
            report = msgspec.convert(answer, audit.AuditReport)
        else:
            report = trio.run(_report, args)
    except (RedisError, CliError) as exc:
        print(f"shardsched audit: {exc}", file=sys.stderr)
        return 2
    output = "json" if args.json else (args.output or "table")
    if output in ("json", "yaml"):
        print(as_text(msgspec.to_builtins(report), output))
    else:
        print(format_report(report))
    return 0 if report.ok else 1
