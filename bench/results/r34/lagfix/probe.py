"""The per-tick probe behind steady-lag-before-after.png (#34): `bench steady`'s fleet
(RATE interval jobs a second, phases spread evenly, one node, two workers, fsync off),
then every run record's lag (created - planned tick) and shard, dumped as JSON rows
[created_ms, lag_ms, shard]. Usage: python probe.py RATE SECONDS OUT.json
(PROFILE=dir records the processes with py-spy)."""

import json
import os
import signal
import sys
import time
from pathlib import Path

import redis as redis_py

from shardsched.bench.burst import server_ms, start_ready
from shardsched.bench.harness import Procs, bench_redis
from shardsched.bench.steady import spread_jobs
from shardsched.core.instants import from_ms
from shardsched.sdk import Client

rate, duration, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
prof = os.environ.get("PROFILE")
with bench_redis(None, "off") as url, Procs() as procs:
    r = redis_py.Redis.from_url(url)
    client = Client(url, "probe")
    start = from_ms(server_ms(r) + 5000)
    client.add_jobs(spread_jobs("steady", rate, start), batch=2000)
    common = ("--redis", url, "--namespace", "probe")
    start_ready(procs, "node", "node", *common, "--node-id", "n", "--no-http", profile=prof)
    for i in range(2):
        start_ready(
            procs,
            f"worker{i}",
            "worker",
            *common,
            "--worker-id",
            f"w{i}",
            "--concurrency",
            "200",
            profile=prof,
        )
    end_ms = int(start.timestamp() * 1000) + round(duration * 1000)
    while server_ms(r) < end_ms + 1000:
        time.sleep(0.2)
    procs.stop_all(signal.SIGINT if prof else signal.SIGTERM)  # py-spy saves on SIGINT
    keys = list(r.scan_iter(match="probe:*:run:*", count=5000))
    pipe = r.pipeline(transaction=False)
    for k in keys:
        pipe.hmget(k, "c", "s", "pl")
    rows = []
    for k, (c, s, pl) in zip(keys, pipe.execute(), strict=True):
        if c is not None:
            tick = int(pl or s or k.decode().split(":")[-2])
            rows.append((int(c), int(c) - tick, k.decode().split("{")[1].split("}")[0]))
    Path(out).write_text(json.dumps(rows))
    client.close()
