"""The burst's plot: the lag distributions, and the runs created, started and completed
over the seconds after the boundary, beside the stream floor measured in the same Redis."""

from __future__ import annotations

from typing import Any


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
