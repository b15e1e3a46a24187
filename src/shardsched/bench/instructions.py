"""``shardsched bench instructions``: Redis's instructions per run, by script, and per entry
of the bare stream floor, counted by callgrind: the same figures on a noisy box.

Wall-clock and CPU figures on a shared 2-core box move by ±20 % from one run to the next
(the stream floor alone: 0.09-0.21 s in one sitting), so a 5 % change to a script cannot
be seen in them. Instructions can: a redis-server run under ``valgrind --tool=callgrind``
counts every instruction it executes, whatever else the machine does. The bench starts
one on a free loopback port, puts n due timer entries on fresh keys, and dumps the count
of each phase on its own: fire (one call per 500), claim (500 a call), complete (every
claim's runs in one call), and the floor (the promote script from ZSET to stream, then
XREADGROUP COUNT 500 and XACK). Request parsing and replies are counted with the
commands; the client's own work is not. Two bare ledgers (bench/bounds.py) are counted
the same way: how near the floor a ledger with the least a scheduler needs can come.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis as redis_py

from shardsched.bench import bounds, floor
from shardsched.runtime.redis_server import free_port, redis_server_args
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.lua import runs as runs_lua
from shardsched.store.scripts import load_functions

BATCH = 500
PHASES = ("fire", "claim", "complete", "floor")


class Counted:
    """A redis-server under callgrind; :meth:`dump` ends a phase and names its file."""

    def __init__(self, out: Path) -> None:
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            raise SystemExit("bench instructions needs valgrind (Debian: apt-get install valgrind)")
        self.out = out
        self.port = free_port()
        # the settings of every bench's and the tests' Redis (dev.redis_server_args)
        self.proc = subprocess.Popen(
            [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p",
             *redis_server_args(self.port, out, "off")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.r = redis_py.Redis(port=self.port)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.r.ping()
                break
            except redis_py.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise SystemExit("redis-server did not start under valgrind") from None
                time.sleep(0.1)

    def dump(self, name: str) -> None:
        subprocess.run(["callgrind_control", "-d", name, str(self.proc.pid)], check=True,
                       capture_output=True)  # fmt: skip

    def counts(self) -> dict[str, int]:
        """Instructions of each dumped phase (a dump zeroes the counters)."""
        out = {}
        for path in self.out.glob("cg.*"):
            text = path.read_text()
            name = re.search(r"^desc: Trigger: dump (\w+)$", text, re.M)
            total = re.search(r"^summary: (\d+)$", text, re.M)
            if name and total:
                out[name.group(1)] = int(total.group(1))
        return out

    def close(self) -> None:
        self.r.close()
        self.proc.terminate()
        self.proc.wait(timeout=60)


def _run(r: redis_py.Redis, calls: list[Call]) -> list[Any]:
    return [floor.run_call(r, call) for call in calls]


def measure(n: int, shards: int, batch: int = BATCH) -> dict[str, Any]:
    """Instructions per run of fire, claim and complete (``batch`` runs a call: 500 as in
    a burst, 1 as in the steady state), and per entry of the floor (500 a call)."""
    with tempfile.TemporaryDirectory(prefix="shardsched-cg-") as tmp:
        server = Counted(Path(tmp))
        try:
            r = server.r
            for load in load_functions():
                r.execute_command(*load)
            dep = Deployment("cg", shards)
            tick, per_shard = floor._seed(r, dep, n, "s", with_jobs=True)
            server.dump("setup")
            _run(r, floor.fire_calls(dep, tick, per_shard, batch))
            server.dump("fire")
            claimed = _run(r, floor.claim_calls(dep, per_shard, batch))
            server.dump("claim")
            replies = _run(r, floor.complete_calls(dep, claimed))
            applied = sum(
                code == runs_lua.Held.APPLIED
                for reply in replies
                for code in runs_lua.decode_completed(reply).codes
            )
            server.dump("complete")
            if applied != n:
                raise SystemExit(f"only {applied} of {n} runs completed")
            _floor(server, r, n, shards)
            for name in bounds.LEDGERS:
                bounds.run_ledger(r, name, n, shards, server.dump)
            counts = server.counts()
        finally:
            server.close()
    per = {name: round(counts[name] / n) for name in PHASES}
    ledger = per["fire"] + per["claim"] + per["complete"]
    bare = {}
    for name in bounds.LEDGERS:
        phases = {p: round(counts[name + p] / n) for p in ("fire", "claim", "complete")}
        total = sum(phases.values())
        bare[name] = {**phases, "ledger": total, "over_floor": round(total / per["floor"], 2)}
    return {
        "runs": n,
        "shards": shards,
        "batch": batch,
        "instructions_per_run": {**per, "ledger": ledger},
        "ledger_over_floor": round(ledger / per["floor"], 2),
        "bare_ledgers": bare,
    }


def _floor(server: Counted, r: redis_py.Redis, n: int, shards: int) -> None:
    """The bare queue over n entries: promote to the stream, read in 500s, acknowledge."""
    pipe = r.pipeline(transaction=False)
    for shard in range(shards):
        due, ready = floor.floor_keys("fl", shard)
        pipe.zadd(due, {f"e{i}": 0 for i in range(shard, n, shards)})
        pipe.xgroup_create(ready, "g", id="0", mkstream=True)
    pipe.execute()
    promote = r.register_script(floor.PROMOTE)
    promote(keys=list(floor.floor_keys("fl", 0)), args=[1, 0])  # loaded before the count
    server.dump("floorsetup")
    for shard in range(shards):
        while promote(keys=list(floor.floor_keys("fl", shard)), args=[1, BATCH]) == BATCH:
            pass
    for shard in range(shards):
        ready = floor.floor_keys("fl", shard)[1]
        while True:
            got: Any = r.xreadgroup("g", "c", {ready: ">"}, count=BATCH)
            if not got or not got[0][1]:
                break
            r.xack(ready, "g", *[entry[0] for entry in got[0][1]])
    server.dump("floor")


def run(args: argparse.Namespace) -> dict[str, Any]:
    print(
        f"instructions: {args.runs} runs, {args.batch} a call, under callgrind (a minute or so)…",
        file=sys.stderr,
        flush=True,
    )
    result = measure(args.runs, args.shards, args.batch)
    per = result["instructions_per_run"]
    print(
        f"instructions per run: fire {per['fire']:,}, claim {per['claim']:,}, complete"
        f" {per['complete']:,} = {per['ledger']:,}; the stream floor {per['floor']:,} per entry;"
        f" {result['ledger_over_floor']}x the floor"
    )
    for name, bare in result["bare_ledgers"].items():
        print(
            f"  bare ledger '{name}' (bench/bounds.py): fire {bare['fire']:,}, claim"
            f" {bare['claim']:,}, complete {bare['complete']:,} = {bare['ledger']:,};"
            f" {bare['over_floor']}x the floor"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        earlier = []
        for given in args.compare:  # LABEL=FILE, or FILE (labelled by its name)
            label, _, file = given.rpartition("=")
            earlier.append((label or Path(file).stem, json.loads(Path(file).read_text())))
        plot(args.plot, result, earlier)
    return result


def plot(path: str, result: dict[str, Any], earlier: list[tuple[str, dict[str, Any]]]) -> None:
    """Instructions per run as stacked bars, fire / claim / complete: each earlier result
    (``--compare``, named by its file), this run, the bare ledgers, and the floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    floor_per = result["instructions_per_run"]["floor"]
    # (label, counts, the floor they are judged by: each result's own)
    bars = [(name, data["instructions_per_run"], data["instructions_per_run"]["floor"])
            for name, data in earlier]  # fmt: skip
    bars.append(("this run", result["instructions_per_run"], floor_per))
    bars += [(f"bare '{name}'", bare, floor_per) for name, bare in result["bare_ledgers"].items()]
    bars.append(("stream floor", {"fire": 0, "claim": 0, "complete": 0}, floor_per))
    bars.reverse()  # the first at the top
    fig, ax = plt.subplots(figsize=(10, 0.55 * len(bars) + 2))
    ys = range(len(bars))
    left = [0.0] * len(bars)
    for phase in ("fire", "claim", "complete"):
        widths = [per[phase] / 1000 for _, per, _ in bars]
        ax.barh(ys, widths, left=left, label=phase)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.barh([0], [floor_per / 1000], color="grey", label="floor")
    for y, (_, _, own_floor) in enumerate(bars):
        total = left[y] or floor_per / 1000
        ax.text(total, y, f"  {total * 1000 / own_floor:.2f}x", va="center", fontsize=9)
    ax.set_yticks(list(ys), [name for name, _, _ in bars])
    ax.set_xlim(0, max(left) * 1.12)
    ax.axvline(2.5 * floor_per / 1000, ls=":", color="black", label="2.5x the floor")
    ax.set_xlabel("Redis instructions per run (thousands; callgrind)")
    ax.set_title(f"bench instructions: {result['runs']} runs on {result['shards']} shards")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "instructions", help="Redis instructions per run by script, and the floor's (callgrind)"
    )
    p.add_argument("--runs", type=int, default=3000)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument(
        "--batch",
        type=int,
        default=BATCH,
        help="runs per fire and claim call (1: the steady state)",
    )
    p.add_argument("--json", default=None, metavar="FILE")
    p.add_argument("--plot", default=None, metavar="PNG", help="stacked bars by script")
    p.add_argument(
        "--compare",
        nargs="*",
        default=[],
        metavar="[LABEL=]JSON",
        help="earlier --json results to plot above this run's",
    )
    p.set_defaults(bench=run)
