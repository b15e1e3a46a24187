"""The plot of bench/RESULTS.md's "The steady state's trigger lag" (#34): each tick's lag
over time in a 30 s probe at 830/s before and after the lag-window fix, and the three
60 s `bench steady` runs of each. Run from this directory."""

import gzip
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [2, 1]})
for name, colour in (("before", "tab:red"), ("after", "tab:blue")):
    with gzip.open(f"probe-{name}-ticks.json.gz") as f:
        rows = sorted(json.load(f))
    t0 = rows[0][0]
    left.scatter(
        [(c - t0) / 1000 for c, _, _ in rows],
        [lag for _, lag, _ in rows],
        s=2,
        color=colour,
        label=name,
        alpha=0.5,
    )
left.set_xlabel("seconds into the probe (830 ticks/s)")
left.set_ylabel("trigger lag of each tick (ms)")
left.set_title("every tick: a stall each half second, growing as the window filled")
left.legend()
runs = {
    w: [json.loads(Path(f"steady-{w}-{i}.json").read_text())["trigger_lag_s"] for i in (1, 2, 3)]
    for w in ("before", "after")
}
x = 0
for w, colour in (("before", "tab:red"), ("after", "tab:blue")):
    for lag in runs[w]:
        right.bar(x, lag["p99"] * 1000, color=colour)
        right.plot([x - 0.3, x + 0.3], [lag["max"] * 1000] * 2, color="black")
        x += 1
    x += 0.5
right.axhline(20, linestyle="--", color="grey")
right.set_xticks([1, 4.5], ["before", "after"])
right.set_ylabel("ms: p99 (bars), max (lines); 20 ms target")
right.set_title("bench steady --rate 830, 60 s, 3 runs each")
fig.tight_layout()
fig.savefig("steady-lag-before-after.png", dpi=110)
