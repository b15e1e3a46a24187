"""The steady state beside the bare stream queue, and the burst beside both (medians of
the sitting's three fleet and three burst runs): CPU a firing, log scale."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent


def load(kind: str) -> list[dict]:
    return [json.loads((HERE / f"{kind}-{i}.json").read_text()) for i in (1, 2, 3)]


def med(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    fleets, bursts = load("fleet"), load("burst")
    f = [d["fleets"][0] for d in fleets]
    floor_steady = [d["stream_floor"]["steady"] for d in fleets]
    floor_burst = [d["stream_floor"]["burst"] for d in fleets]
    groups = {
        "Redis": (
            med([x["redis_cpu_us_per_firing"] for x in f]),
            med([x["redis_cpu_us_per_firing"] for x in floor_steady]),
            med([b["cpu_us_per_run"]["redis"] for b in bursts]),
            med([x["redis_cpu_us_per_run"] for x in floor_burst]),
        ),
        "node / producer": (
            med([x["process_cpu_us_per_firing"]["node"] for x in f]),
            med([x["producer_cpu_us_per_firing"] for x in floor_steady]),
            med([b["cpu_us_per_run"]["node"] for b in bursts]),
            float("nan"),  # the burst floor's promote runs in the bench process
        ),
        "workers / consumers": (
            med([x["process_cpu_us_per_firing"]["worker_hosts"] for x in f]),
            med([x["consumer_cpu_us_per_firing"] for x in floor_steady]),
            med([b["cpu_us_per_run"]["workers"] for b in bursts]),
            med([x["consumer_cpu_us_per_run"] for x in floor_burst]),
        ),
    }
    labels = ("shardsched, steady 830/s", "bare stream, steady 830/s",
              "shardsched, burst 25,000", "bare stream, burst 25,000")  # fmt: skip
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.2
    for k, label in enumerate(labels):
        xs = [g + (k - 1.5) * width for g in range(len(groups))]
        ys = [v[k] for v in groups.values()]
        bars = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_yscale("log")
    ax.set_ylabel("CPU µs a firing (a run in the burst)")
    ax.set_title("The steady state against the bare stream queue, and the burst (medians of 3)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=4)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(HERE / "steady-vs-floor.png", dpi=110)
    for name, v in groups.items():
        print(name, [round(x, 1) for x in v])


if __name__ == "__main__":
    main()
