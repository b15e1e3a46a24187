"""Instructions of an FCALL / EVALSHA that returns at once, with a one-item fire's KEYS and ARGV."""

import tempfile
from pathlib import Path

from shardsched.bench import floor
from shardsched.bench.instructions import Counted
from shardsched.store.deployment import Deployment

with tempfile.TemporaryDirectory() as tmp:
    s = Counted(Path(tmp))
    r = s.r
    nop = "redis.register_function{function_name='nop', callback=function(k, a) return {1} end}"
    r.execute_command("FUNCTION", "LOAD", "#!lua name=nop\n" + nop)
    sha = r.script_load("#!lua\nreturn {1}")
    dep = Deployment("cg", 64)
    tick, per_shard = floor._seed(r, dep, 640, "s", with_jobs=True)
    calls = floor.fire_calls(dep, tick, per_shard, 1)
    s.dump("setup")
    for c in calls:
        r.execute_command("FCALL", "nop", len(c.keys), *c.keys, *c.args)
    s.dump("fcall")
    for c in calls:
        r.execute_command("EVALSHA", sha, len(c.keys), *c.keys, *c.args)
    s.dump("evalsha")
    counts = s.counts()
    s.close()
n = len(calls)
print(n, {k: round(v / n) for k, v in counts.items() if k in ("fcall", "evalsha")})
