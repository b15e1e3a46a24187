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
commands; the client's own work is not.
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

from shardsched.bench import floor
from shardsched.dev import free_port, redis_server_args
from shardsched.store.calls import Call
from shardsched.store.deployment import Deployment
from shardsched.store.lua import runs as runs_lua
from shardsched.store.scripts import SCRIPTS

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


def measure(n: int, shards: int) -> dict[str, Any]:
    """Instructions per run of fire, claim and complete, and per entry of the floor."""
    with tempfile.TemporaryDirectory(prefix="shardsched-cg-") as tmp:
        server = Counted(Path(tmp))
        try:
            r = server.r
            for script in SCRIPTS.values():
                r.script_load(script.source)
            dep = Deployment("cg", shards)
            tick, per_shard = floor._seed(r, dep, n, "s", with_jobs=True)
            server.dump("setup")
            _run(r, floor.fire_calls(dep, tick, per_shard))
            server.dump("fire")
            claimed = _run(r, floor.claim_calls(dep, per_shard))
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
            counts = server.counts()
        finally:
            server.close()
    per = {name: round(counts[name] / n) for name in PHASES}
    ledger = per["fire"] + per["claim"] + per["complete"]
    return {
        "runs": n,
        "shards": shards,
        "instructions_per_run": {**per, "ledger": ledger},
        "ledger_over_floor": round(ledger / per["floor"], 2),
    }


def _floor(server: Counted, r: redis_py.Redis, n: int, shards: int) -> None:
    """The bare queue over n entries: promote to the stream, read in 500s, acknowledge."""
    pipe = r.pipeline(transaction=False)
    for shard in range(shards):
        due, ready = floor._keys("fl", shard)
        pipe.zadd(due, {f"e{i}": 0 for i in range(shard, n, shards)})
        pipe.xgroup_create(ready, "g", id="0", mkstream=True)
    pipe.execute()
    promote = r.register_script(floor.PROMOTE)
    promote(keys=list(floor._keys("fl", 0)), args=[1, 0])  # loaded before the count
    server.dump("floorsetup")
    for shard in range(shards):
        while promote(keys=list(floor._keys("fl", shard)), args=[1, BATCH]) == BATCH:
            pass
    for shard in range(shards):
        ready = floor._keys("fl", shard)[1]
        while True:
            got: Any = r.xreadgroup("g", "c", {ready: ">"}, count=BATCH)
            if not got or not got[0][1]:
                break
            r.xack(ready, "g", *[entry[0] for entry in got[0][1]])
    server.dump("floor")


def run(args: argparse.Namespace) -> dict[str, Any]:
    print(
        f"instructions: {args.runs} runs under callgrind (a minute or so)…",
        file=sys.stderr,
        flush=True,
    )
    result = measure(args.runs, args.shards)
    per = result["instructions_per_run"]
    print(
        f"instructions per run: fire {per['fire']:,}, claim {per['claim']:,}, complete"
        f" {per['complete']:,} = {per['ledger']:,}; the stream floor {per['floor']:,} per entry;"
        f" {result['ledger_over_floor']}x the floor"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "instructions", help="Redis instructions per run by script, and the floor's (callgrind)"
    )
    p.add_argument("--runs", type=int, default=3000)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--json", default=None, metavar="FILE")
    p.set_defaults(bench=run)
