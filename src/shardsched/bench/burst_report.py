"""The burst's report: the text printed, and the plot of the lag distributions and of the
runs created, started and completed over the seconds after the boundary, beside the stream
floor measured in the same Redis."""

from __future__ import annotations

from typing import Any

from shardsched.bench import floor


def plot(path: str, rows: list[list[Any]], boundary: int, result: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (hist, cum) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = {
        "trigger": [(r[1] - r[0]) / 1000 for r in rows if r[1]],
        "start": [(r[3] - r[0]) / 1000 for r in rows if r[3]],
        "end to end": [(r[4] - r[0]) / 1000 for r in rows if r[4]],
    }
    for label, values in series.items():
        hist.hist(values, bins=60, alpha=0.55, label=label)
    hist.set_xlabel("lag after the tick (s)")
    hist.set_ylabel("runs")
    hist.set_title("lag distribution")
    hist.legend()
    for label, column in (("created", 1), ("started", 3), ("completed", 4)):
        times = sorted((r[column] - boundary) / 1000 for r in rows if r[column])
        cum.plot(times, range(1, len(times) + 1), label=label)
    stream = result.get("stream_floor")
    if stream:  # measured after the burst on the same Redis: its all read, from 0
        cum.axvline(stream["all_started_s"], ls=":", color="grey", label="stream floor: all read")
    cum.set_xlabel("seconds after the boundary")
    cum.set_ylabel("runs")
    cum.set_title(
        f"{result['jobs']} jobs, fsync {result['fsync']}: all created {result['all_triggered_s']} s"
    )
    cum.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def format_result(r: dict) -> str:
    def row(name: str, d: dict) -> str:
        return f"  {name:<12} p50 {d['p50']}  p90 {d['p90']}  p99 {d['p99']}  max {d['max']}"

    return "\n".join(
        [
            f"burst: {r['jobs']} jobs ({r['mode']}, {r['command']}), fsync {r['fsync']}, "
            f"{r['nodes']} node(s), {r['workers']} worker(s) x {r['concurrency']}"
            + (f" over {r['queues']} queues" if r.get("queues", 1) > 1 else "")
            + (f" and {r['keys']} concurrency keys" if r.get("keys") else ""),
            row("trigger lag", r["trigger_lag_s"]),
            row("claim lag", r["claim_lag_s"]),
            row("start lag", r["start_lag_s"]),
            row("end to end", r["end_to_end_s"]),
            f"  all created {r['all_triggered_s']} s, all started {r['all_started_s']} s, "
            f"all completed {r['all_completed_s']} s after the boundary "
            f"({r['throughput_runs_per_s']} runs/s)",
            f"  redis floor {r['redis_floor_s']} s ({r['redis_floor_fires_per_s']} fires/s); "
            f"overhead ratio {r['trigger_overhead_ratio']}",
            f"  audit: {r['audit']}; registration {r['register_jobs_per_s']} jobs/s",
            *([f"  created per second: {r['created_per_second']}"] if r.get("spread_s") else []),
            *floor.report_lines(r),
            *([_traces_line(r["traces"])] if r.get("traces") else []),
        ]
    )


def _traces_line(t: dict) -> str:
    return (
        f"  traces ({t['mode']}): {t['spans']} spans of {t['traces']} traces in "
        f"{t['requests']} exports ({t['bytes']} bytes); failed runs traced "
        f"{t['failed_runs_traced']} of {t['failed_runs']}"
    )
