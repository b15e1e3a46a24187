#!lua
--[[
  A worker reports the outcomes of a batch of runs of one shard. Each is applied only if
  the caller still holds the run: the run is running on this worker, from this stream
  entry, under this delivery token (its 'w', 'e' and 'dt'). The entry's pending state is
  not looked at: every script that takes an entry from a worker (reclaim, release_runs,
  complete) changes those fields in the same step, and claim sets them with the entry,
  so they say who holds the run (renew_runs and flush_output check the same three). A
  stale completion is refused and counted on the run (its 'sx' field: a superseded
  execution), never applied.

  A run that ends its job's active tick releases the oldest tick its overlap buffered
  (buf:<job>, lib/buffer.lua).
  A success re-arms the job's dead-man's switch, if it has one ('dms' on the job: its
  entry in the shard's deadman ZSET moves to now + dms; lua/deadlines.lua).

  A failed attempt with a retry time inserts the next attempt (a new run record,
  <job>:<tick>:<attempt + 1>, state 'retrying') into the retry timer, due then; a run
  ending 'dead_letter' is listed in the shard's dead-letter set. A DAG task's run ending
  for good (succeeded, dead_letter, or failed with no next attempt) settles its task in
  the DAG run: downstream tasks are released or skipped here, atomically (lib/dag.lua);
  a job's run failing for good is handed to the owner, which may auto-pause the job
  (lib/autopause.lua); a backfill run ending its tick starts the next queued backfill tick
  (lib/backfill.lua). A job's own hash is only read here: what a completion counts goes
  to its counters (cnt:<id>, lib/counters.lua).

  KEYS[1] ready       STREAM of fired runs
  KEYS[2] retries     ZSET run_id -> when the attempt is due
  KEYS[3] deadletter  ZSET run_id -> when it was dead-lettered
  KEYS[4] autopause   ZSET job_id -> when a run of it failed for good, for the owner to
                      decide on its auto-pause (lib/autopause.lua)
  ARGV[1] consumer group
  ARGV[2] worker id
  ARGV[3] shard key base; run:<id> and out:<id> keys (and lib/dag's dagv:<dag>:<tv> (with dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>))
          are built from it (same hash slot)
  ARGV[4] wake channel (published when a retry was inserted or a job awaits its
          auto-pause decision: the owner sleeps until its timer or retry set is due, and
          these are due sooner)
  ARGV[5] shard number
  ARGV[6] output quota of a job, bytes kept in Redis over all its runs (0: none)
  ARGV[7] output quota of this shard, bytes (0: none; lib/outquota.lua)
  ARGV[8..] items of 10: entry id, run id, delivery token, terminal state (succeeded |
          failed | dead_letter), exit code ('' when the process did not exit on its own),
          reason (''), output ('' keeps none), execution start (server-clock ms, ''
          unknown), next attempt due (ms; '' for none), bytes printed in all (the output
          is their tail; kept as the run's 'ol' with the output; '' unknown)

  Keys built from the shard key base (each in KEYS' hash slot): bfq:<id>, cnt:<id>,
    dagq:<id>, dagrun:<id>, dagv:<id>, dagwait, events, failures (runs ended failed or
    dead_letter), job:<id> (read; its 'act' when a buffered tick runs), out:<id>,
    run:<id>, runs:<id>, skips:<id> (lib/dag's; not written by a completion), stats,
    buf:<id> (lib/buffer.lua), deadman, outq (lib/outcomes.lua).

  Each run's stream entry is acknowledged on its queue's stream ('q' on its record,
  lib/queues.lua); a retry keeps the run's queue.

  Returns {now_ms, released, code1, code2, ...}: released is 0 when no DAG task or backfill
  tick was put on a ready stream, else (the caller wakes a worker, store/ready.py) 1 when
  all went to the default queue, or the queues they went to (lib/queues.lua); a
  code per item: 1 applied; 0 this very completion
  was applied before (a retry after a lost reply); -1 no such run; -2 the caller no longer
  holds the run (recorded).
]]
local rcall = redis.call
-- @include holder
-- @include runids
-- @include clock
-- @include events
-- @include queues
local ready_key, retries_key, dead_key, autopause_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, worker, base = ARGV[1], ARGV[2], ARGV[3]

-- @include dag
-- @include backfill
-- @include buffer
-- @include outquota
-- @include outcomes
local job_quota, shard_quota = tonumber(ARGV[6]), tonumber(ARGV[7])

-- A run of `job` failed for good: a job with an auto-pause policy is handed to the owner,
-- whose next fire call decides (lib/autopause.lua). Returns true when it was.
local function auto_pause_suspect(job, now)
  local info = rcall('HMGET', base .. 'job:' .. job, 'status', 'apa')
  if info[1] ~= 'active' or not info[2] then
    return false
  end
  rcall('ZADD', autopause_key, 'NX', now, job)
  return true
end

local now = server_now_ms()
local out = {now, 0}
local acked = {}  -- entry ids on the default queue's stream
local acked_on = {}  -- queue -> entry ids on its stream
local retried = false
local paused = false
local released = false
local events = {}
local ended_event = {}  -- state -> its event's value, reason ''
for i = 8, #ARGV, 10 do
  local eid, rid, token, state = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'w', 'dt', 'e', 'd', 'bf', 'q')
  local code
  if not run[1] then
    code = -1
  elseif holds_run(run, 'running', worker, token, eid) then
    rcall('HSET', run_key, 'st', state, 'f', now, 'x', ARGV[i + 4], 'r', ARGV[i + 5],
      'xs', ARGV[i + 7])
    local reason = ARGV[i + 5]
    events[#events + 1] = rid
    if reason == '' then  -- most: one value a state for the whole batch
      local value = ended_event[state]
      if not value then
        value = event_value('running', state, worker, '')
        ended_event[state] = value
      end
      events[#events + 1] = value
    else
      events[#events + 1] = event_value('running', state, worker, reason)
    end
    if ARGV[i + 6] ~= '' then
      local cut_by = keep_output(base, job_of_run(rid),
        base .. 'out:' .. rid, ARGV[i + 6], false, job_quota, shard_quota)
      if cut_by then
        rcall('HSET', run_key, 'oq', cut_by)
      end
      if ARGV[i + 9] ~= '' then
        rcall('HSET', run_key, 'ol', ARGV[i + 9])
      end
    end
    local drid = run[5]
    if state == 'dead_letter' then
      rcall('ZADD', dead_key, now, rid)
    end
    if state ~= 'succeeded' then
      rcall('ZADD', base .. 'failures', now, rid)  -- the failure inbox, every job's
    end
    if state == 'succeeded' or ARGV[i + 8] == '' then  -- the run's tick ends here
      note_outcome(base, job_of_run(rid), rid, state == 'succeeded' and 's' or 'f', now)
      if drid then
        if dag_settle(base, ready_key, drid, dag_task_of(rid),
            state == 'succeeded' and 's' or 'f', now) > 0 then
          released = true
        end
      else
        local job = job_of_run(rid)
        if run[6] and backfill_done(base, ready_key, job, now) > 0 then
          released = true
        end
        if state ~= 'succeeded' and auto_pause_suspect(job, now) then
          paused = true
        end
        if buffer_ends(base, job, rid, now) > 0 then  -- a buffered tick's turn
          released = true
        end
        if state == 'succeeded' then  -- a dead-man's switch, if the job has one, re-armed
          local within = rcall('HGET', base .. 'job:' .. job, 'dms')
          if within then
            rcall('ZADD', base .. 'deadman', now + tonumber(within), job)
          end
        end
      end
    else
      local job = job_of_run(rid)
      local next_rid = next_attempt(rid)
      local next_key = base .. 'run:' .. next_rid
      if rcall('EXISTS', next_key) == 0 then
        rcall('HSET', next_key, 'st', 'retrying', 'c', now, 'due', ARGV[i + 8])
        local kept = rcall('HMGET', run_key, 's', 'args')
        carry_to_next(next_key, kept[1], kept[2], run[7])
        if run[6] then
          rcall('HSET', next_key, 'bf', '1')
        end
        if drid then
          rcall('HSET', next_key, 'd', drid)
          rcall('HSET', base .. 'dagrun:' .. drid, 'r:' .. dag_task_of(rid), next_rid)
        end
        rcall('ZADD', base .. 'runs:' .. job, rcall('ZSCORE', base .. 'runs:' .. job, rid) or 0,
          next_rid)
        rcall('ZADD', retries_key, ARGV[i + 8], next_rid)
        add_event(events, next_rid, '', 'retrying', '', '')
        retried = true
        rcall('HSET', run_key, 'nx', next_rid)
      end
    end
    if run[7] then
      local other = acked_on[run[7]]
      if not other then
        other = {}
        acked_on[run[7]] = other
      end
      other[#other + 1] = eid
    else
      acked[#acked + 1] = eid
    end
    code = 1
  elseif holds_run(run, state, worker, token, eid) then
    code = 0  -- this completion was applied already (the call is sent again)
  else
    rcall('HINCRBY', run_key, 'sx', 1)
    code = -2
  end
  out[#out + 1] = code
end
flush_events(base, events)
if retried or paused then
  rcall('PUBLISH', ARGV[4], ARGV[5])
end
if released then
  local queues = woken_queues()
  out[2] = queues == '' and 1 or queues
end
if #acked > 0 then
  rcall('XACK', ready_key, group, unpack(acked))
  rcall('XDEL', ready_key, unpack(acked))
end
for q, eids in pairs(acked_on) do
  local stream = ready_of(base, q)
  rcall('XACK', stream, group, unpack(eids))
  rcall('XDEL', stream, unpack(eids))
end
return out
