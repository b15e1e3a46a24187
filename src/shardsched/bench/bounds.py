"""Two ledgers stripped to the bone, counted beside the real one by ``bench instructions``:
how near the bare stream floor can *any* ledger come on this Redis?

#18 asks for the burst within 2.5x of the stream floor. The burst is bound by Redis's
CPU, so the ratio follows Redis's instructions per run. These ledgers keep only what a
scheduler cannot do without, and drop everything else the real scripts do (events, the
run-history index, lease deadlines, overlap and DAG checks, retries, the next batch's
timing), so their counts are lower bounds for a ledger with those duties:

- **records**: today's shape at its least. Fire compares the timer entry's score, makes
  the run record if absent (the dedupe) and appends the entry; claim reads the stream,
  skips a run no longer scheduled (a cancel), reads the job's spec and marks the run
  held with one packed field; complete checks that field, writes the outcome, XACKs and
  XDELs.
- **entry**: the stream entry is the run until it ends. Fire only moves the timer entry
  to the stream; claim reads the stream and the job's spec and writes nothing; complete
  writes the run's one record, XACKs and XDELs. No cancel of a fired run, no fencing.

The scripts are written for this count only and are not the scheduler's (lua/ holds
those); they run on their own keys, batches of 500, over the same shards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis as redis_py

BATCH = 500
_FIRE_RECORDS = """
local n = 0
for i = 1, #ARGV, 2 do
  local job, old = ARGV[i], ARGV[i + 1]
  local s = redis.call('ZSCORE', KEYS[1], job)
  if s and tonumber(s) == tonumber(old) then
    local rid = job .. ':' .. old .. ':1'
    local rk = KEYS[3] .. 'run:' .. rid
    if redis.call('EXISTS', rk) == 0 then
      redis.call('HSET', rk, 'st', 'scheduled', 'c', '1764657000000')
      redis.call('XADD', KEYS[2], '*', 'r', rid)
      n = n + 1
    end
    redis.call('ZREM', KEYS[1], job)
  end
end
return n
"""
_FIRE_ENTRY = """
local n = 0
for i = 1, #ARGV, 2 do
  local job, old = ARGV[i], ARGV[i + 1]
  local s = redis.call('ZSCORE', KEYS[1], job)
  if s and tonumber(s) == tonumber(old) then
    redis.call('XADD', KEYS[2], '*', 'r', job .. ':' .. old .. ':1')
    redis.call('ZREM', KEYS[1], job)
    n = n + 1
  end
end
return n
"""
_CLAIM_RECORDS = """
local reply = redis.call('XREADGROUP', 'GROUP', 'g', ARGV[1], 'COUNT', ARGV[2],
  'STREAMS', KEYS[1], '>')
local out = {}
if not reply then return out end
for _, e in ipairs(reply[1][2]) do
  local eid, rid = e[1], e[2][2]
  local rk = KEYS[2] .. 'run:' .. rid
  if redis.call('HGET', rk, 'st') == 'scheduled' then
    local spec = redis.call('HGET', KEYS[2] .. 'job:' .. string.sub(rid, 1, 8), 'spec')
    redis.call('HSET', rk, 'st', 'running', 'h', ARGV[1] .. '|1|' .. eid)
    out[#out + 1] = eid; out[#out + 1] = rid; out[#out + 1] = spec or ''
  end
end
return out
"""
_CLAIM_ENTRY = """
local reply = redis.call('XREADGROUP', 'GROUP', 'g', ARGV[1], 'COUNT', ARGV[2],
  'STREAMS', KEYS[1], '>')
local out = {}
if not reply then return out end
for _, e in ipairs(reply[1][2]) do
  local eid, rid = e[1], e[2][2]
  out[#out + 1] = eid; out[#out + 1] = rid
  out[#out + 1] = redis.call('HGET', KEYS[2] .. 'job:' .. string.sub(rid, 1, 8), 'spec') or ''
end
return out
"""
_COMPLETE_RECORDS = """
local acked = {}
for i = 2, #ARGV, 2 do
  local eid, rid = ARGV[i], ARGV[i + 1]
  local rk = KEYS[2] .. 'run:' .. rid
  local run = redis.call('HMGET', rk, 'st', 'h')
  if run[1] == 'running' and run[2] == ARGV[1] .. '|1|' .. eid then
    redis.call('HSET', rk, 'st', 'succeeded', 'f', '1764657000000', 'x', '0')
    acked[#acked + 1] = eid
  end
end
if #acked > 0 then
  redis.call('XACK', KEYS[1], 'g', unpack(acked))
  redis.call('XDEL', KEYS[1], unpack(acked))
end
return #acked
"""
_COMPLETE_ENTRY = """
local acked = {}
for i = 2, #ARGV, 2 do
  local eid, rid = ARGV[i], ARGV[i + 1]
  redis.call('HSET', KEYS[2] .. 'run:' .. rid, 'st', 'succeeded', 'b', '1764657000000',
    'f', '1764657000000', 'x', '0')
  acked[#acked + 1] = eid
end
redis.call('XACK', KEYS[1], 'g', unpack(acked))
redis.call('XDEL', KEYS[1], unpack(acked))
return #acked
"""
LEDGERS = {
    "records": (_FIRE_RECORDS, _CLAIM_RECORDS, _COMPLETE_RECORDS),
    "entry": (_FIRE_ENTRY, _CLAIM_ENTRY, _COMPLETE_ENTRY),
}


def run_ledger(
    r: redis_py.Redis, name: str, n: int, shards: int, dump: Callable[[str], None]
) -> None:
    """n runs of one bare ledger: seeded, then ``dump(<name>fire|claim|complete)`` after
    each phase (the seeding is dumped as ``<name>setup``)."""
    fire_src, claim_src, complete_src = LEDGERS[name]
    pipe = r.pipeline(transaction=False)
    jobs: dict[int, list[str]] = {}
    for shard in range(shards):
        base = f"{name}:{{{shard}}}:"
        jobs[shard] = [f"j{i:07d}" for i in range(shard, n, shards)]  # 8 characters
        pipe.zadd(base + "timer", dict.fromkeys(jobs[shard], 1000))
        for job in jobs[shard]:
            pipe.hset(base + "job:" + job, mapping={"spec": f'{{"name":"{job}"}}', "lease": 30000})
        pipe.xgroup_create(base + "ready", "g", id="0", mkstream=True)
    pipe.execute()
    fire, claim, complete = (r.register_script(s) for s in (fire_src, claim_src, complete_src))
    for script in (fire, claim, complete):
        r.script_load(script.script)
    dump(name + "setup")

    def keys(shard: int) -> list[str]:
        base = f"{name}:{{{shard}}}:"
        return [base + "timer", base + "ready", base]

    for shard in range(shards):
        for i in range(0, len(jobs[shard]), BATCH):
            fire(
                keys=keys(shard),
                args=[a for job in jobs[shard][i : i + BATCH] for a in (job, 1000)],
            )
    dump(name + "fire")
    claimed: list[tuple[int, Any]] = []
    for shard in range(shards):
        while got := claim(keys=keys(shard)[1:], args=["w1", BATCH]):
            claimed.append((shard, got))
    dump(name + "claim")
    done = 0
    for shard, got in claimed:
        pairs = [a for k in range(0, len(got), 3) for a in (got[k], got[k + 1])]
        done += complete(keys=keys(shard)[1:], args=["w1", *pairs])
    dump(name + "complete")
    if done != n:
        raise SystemExit(f"the {name} ledger completed {done} of {n} runs")
