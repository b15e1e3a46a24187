#!lua
--[[
  The shard owner takes back runs whose lease lapsed (worker crashed, paused, cut off):
  each goes back to 'scheduled' with the same attempt and is delivered again under a new
  stream entry, its reclaim count 'rc' raised. A run whose lease lapsed <poison> times in
  a row (its command kills its worker) is failed as poison instead of delivered forever,
  and its job, if active, is quarantined (paused with the reason, lib/quarantine.lua), so
  its next tick does not kill the next workers; a DAG task's run failed so settles its
  task in the DAG run (lib/dag.lua). The ticks its overlap policy buffered behind it
  (lib/buffer.lua) are recorded skipped ('quarantined') when the job is quarantined;
  otherwise the oldest runs now, as after any end of the job's active run. A run a
  cancel_other tick cancelled keeps its entry until its lease ends (its worker stopped
  renewing it when told it was cancelled): then the tick waiting on it runs.

  Nothing is looked at before the shard's reclaim_at (the earliest lease deadline known:
  claim.lua lowers it, renewals only push deadlines later). Otherwise every pending entry
  is looked at (up to ARGV[4]), and reclaim_at is set to the earliest deadline of the runs
  still held: a second ahead when more entries are pending than were looked at, ten
  seconds ahead when none is held (a sweep all the same).

  Every queue's stream of the shard is looked at: 'ready' and one per queue in the
  shard's set of queues (lib/queues.lua); a run goes back to its own queue.

  KEYS[1] ready       STREAM of fired runs (the default queue's)
  KEYS[2] epoch       STRING the shard's fencing token
  KEYS[3] stats       HASH shard counters (lease_reclaims, poisoned, quarantined,
                      refused_fire)
  KEYS[4] reclaim_at  STRING when to look next (ms)
  KEYS[5] timer       ZSET job_id -> next fire (ms): a poison run's job leaves it
  ARGV[1] epoch the caller holds
  ARGV[2] consumer group
  ARGV[3] shard key base; run:<id> and failures keys (and lib/dag's dagv:<dag>:<tv> (with dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>))
          are built from it (same hash slot)
  ARGV[4] how many pending entries to look at, at most
  ARGV[5] poison limit (lapses in a row before the run is failed)

  Keys built from the shard key base (each in KEYS' hash slot): bfq:<id>, buf:<id>,
    cnt:<id>, dagq:<id>, dagrun:<id>, dagwait, job:<id>, run:<id>, runs:<id>, segs:<id>,
    skips:<id>, vers:<id>.

  Returns {1, reclaimed, poisoned, reclaim_at ('' when nothing was ever claimed), now_ms,
  released, queues} (released: DAG tasks released by runs failed here; queues: those runs
  went back to or were released on, lib/queues.lua; both absent when none looked at),
  or {-1} when the caller's epoch is stale.
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include events
-- @include queues
local ready_key, epoch_key, stats_key, reclaim_at_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local timer_key = KEYS[5]
local group, base = ARGV[2], ARGV[3]

-- @include quarantine
-- @include skips
-- @include dag
-- @include backfill
-- @include buffer
if rcall('GET', epoch_key) ~= ARGV[1] then
  rcall('HINCRBY', stats_key, 'refused_fire', 1)
  return {-1}
end
local now = server_now_ms()
local now_n = tonumber(now)
local at = rcall('GET', reclaim_at_key)
if at and now_n < tonumber(at) then
  return {1, 0, 0, at, now}  -- no lease can have lapsed yet
end
local reclaimed, poisoned, released, quarantined = 0, 0, 0, 0
local earliest = nil
local events = {}
local looked, full = false, false
local function reclaim_stream(ready_key, q)
  local pending = redis.pcall('XPENDING', ready_key, group, '-', '+', ARGV[4])
  if pending.err then
    return  -- no stream or consumer group yet: nothing was ever claimed from it
  end
  looked = true
  if #pending >= tonumber(ARGV[4]) then
    full = true
  end
  for _, entry in ipairs(pending) do
    local eid = entry[1]
    local body = rcall('XRANGE', ready_key, eid, eid)
    local rid = body[1] and body[1][2][2]
    local run = rid and rcall('HMGET', base .. 'run:' .. rid, 'st', 'l', 'rc', 'd', 'bf', 'w') or {}
    local job = rid and job_of_run(rid)
    if run[1] == 'cancelled' and run[2] and tonumber(run[2]) >= now_n and not run[4]
        and rcall('EXISTS', base .. 'buf:' .. job) == 1 then
      -- cancelled by a cancel_other tick, which waits until its worker has stopped it:
      -- it has, or is gone, once its lease (no longer renewed) ends
      local lease = tonumber(run[2])
      if not earliest or lease < earliest then
        earliest = lease
      end
    elseif run[1] ~= 'running' then
      -- completed meanwhile, cancelled, or an orphan entry: nothing holds it any more
      if run[1] == nil or run[1] ~= 'scheduled' then
        rcall('XACK', ready_key, group, eid)
        rcall('XDEL', ready_key, eid)
        if run[1] == 'cancelled' and not run[4] then  -- a tick waiting on it runs now
          released = released + buffer_ends(base, job, rid, now)
        end
      end
    elseif tonumber(run[2] or '0') >= now_n then
      local lease = tonumber(run[2])
      if not earliest or lease < earliest then
        earliest = lease
      end
    else
      local run_key = base .. 'run:' .. rid
      local lapses = tonumber(run[3] or '0') + 1
      rcall('XACK', ready_key, group, eid)
      rcall('XDEL', ready_key, eid)
      if lapses >= tonumber(ARGV[5]) then
        rcall('HSET', run_key, 'st', 'failed', 'rc', lapses, 'f', now,
          'r', 'lease lapsed ' .. lapses .. ' times in a row (poison run)')
        add_event(events, rid, 'running', 'failed', run[6], 'poison')
        rcall('ZADD', base .. 'failures', now, rid)  -- the failure inbox
        note_outcome(base, job_of_run(rid), rid, 'f', now)
        poisoned = poisoned + 1
        if run[4] then
          released = released + dag_settle(base, ready_key, run[4], dag_task_of(rid), 'f', now)
        else
          local job = job_of_run(rid)
          local job_key = base .. 'job:' .. job
          local score = rcall('ZSCORE', timer_key, job)
          local now_quarantined = false
          if score and rcall('HGET', job_key, 'status') == 'active' then
            quarantine_job(job_key, timer_key, base .. 'segs:' .. job, base .. 'vers:' .. job,
              job, score, 'poison: run ' .. rid .. ' ended its worker ' .. lapses .. ' times',
              now)
            quarantined = quarantined + 1
            now_quarantined = true
          end
          if run[5] then
            released = released + backfill_done(base, ready_key, job, now)
          end
          local buffered = base .. 'buf:' .. job
          if now_quarantined then  -- what waited behind the poison run does not run now
            for _, tick in ipairs(rcall('LRANGE', buffered, 0, -1)) do
              record_skip(base, job, tick, tick, 1, 'quarantined', now)
            end
            rcall('DEL', buffered)
          else
            released = released + buffer_ends(base, job, rid, now)
          end
        end
      else
        rcall('HSET', run_key, 'st', 'scheduled', 'rc', lapses, 'w', '', 'l', '')
        enqueue(base, rid, q)
        add_event(events, rid, 'running', 'scheduled', run[6], 'reclaimed')
        reclaimed = reclaimed + 1
      end
    end
  end
end
reclaim_stream(ready_key, '')
for _, q in ipairs(rcall('SMEMBERS', base .. 'queues')) do
  reclaim_stream(ready_of(base, q), q)
end
if not looked then
  return {1, 0, 0, '', now}  -- no stream or consumer group yet: nothing was ever claimed
end
flush_events(base, events)
if reclaimed > 0 then
  rcall('HINCRBY', stats_key, 'lease_reclaims', reclaimed)
end
if poisoned > 0 then
  rcall('HINCRBY', stats_key, 'poisoned', poisoned)
end
if quarantined > 0 then
  rcall('HINCRBY', stats_key, 'quarantined', quarantined)
end
if full then
  earliest = now_n + 1000  -- more pending than looked at: look again in a second
end
-- Nothing held: a sweep in 10 s all the same (entries from before reclaim_at existed).
earliest = earliest or now_n + 10000
rcall('SET', reclaim_at_key, earliest)
return {1, reclaimed, poisoned, earliest, now, released, woken_queues()}
