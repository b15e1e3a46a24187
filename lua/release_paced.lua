#!lua
--[[
  The owner's pacer of paced backfills (a resume's `paced` choice, a backfill's
  `per_minute`): each job of the shard's bfpace ZSET whose next release is due gets the
  ticks its pace allows since then (one per 'bfp' ms elapsed, at most a second's worth,
  within its 'bfm' places), and its next release is set that many paces on; a job whose queue emptied, or that is no
  longer paced, leaves the set.

  KEYS[1] bfpace  ZSET job_id -> when its next paced release is due (ms)
  KEYS[2] epoch   STRING the shard's fencing token
  KEYS[3] ready   STREAM of fired runs
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; job:<id>, bfq:<id>, run:<id>, runs:<id>, cnt:<id> and the
          events stream are built from it
  ARGV[3] how many due jobs to look at, at most

  Keys built from the shard key base (each in KEYS' hash slot): bfq:<id>, cnt:<id>,
    events, job:<id>, run:<id>, runs:<id>.

  Returns {1, released, queues} (the queues runs went to: lib/queues.lua), or {-1} when
  the caller's epoch is stale.
]]
local rcall = redis.call
-- @include clock
-- @include queues
local pace_key, epoch_key, ready_key = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[2]

-- @include backfill

if rcall('GET', epoch_key) ~= ARGV[1] then
  return {-1}
end
local now = server_now_ms()
local released = 0
local due = rcall('ZRANGE', pace_key, '-inf', now, 'BYSCORE', 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[3]))
for i = 1, #due, 2 do
  local job, at = due[i], tonumber(due[i + 1])
  local pace = tonumber(rcall('HGET', base .. 'job:' .. job, 'bfp') or '0')
  if pace <= 0 then
    rcall('ZREM', pace_key, job)
  else
    -- what its pace allows since it fell due, but never more than a second's worth at
    -- once (an owner back from an outage does not release the outage's share in a burst)
    local owed = math.min(math.floor((now - at) / pace) + 1, math.ceil(1000 / pace))
    released = released + backfill_release(base, ready_key, job, now, owed)
    if rcall('ZCARD', base .. 'bfq:' .. job) == 0 then
      rcall('ZREM', pace_key, job)
    else
      rcall('ZADD', pace_key, math.max(at + owed * pace, now - 1000 + pace), job)
    end
  end
end
return {1, released, woken_queues()}
