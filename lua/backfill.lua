#!lua
--[[
  Backfill (POST /jobs/{id}/backfill): queue the runs of the given nominal ticks that have
  none yet, and start as many as max_concurrent allows; the rest start as earlier ones
  end (lib/backfill.lua, from complete.lua). Run ids are the scheduler's own,
  <job>:<tick>:1, so a tick that already ran (or is queued) is left alone and a backfill
  twice is a no-op.

  KEYS[1] job     HASH the job
  KEYS[2] ready   STREAM of fired runs
  ARGV[1] shard key base; run:<id>, runs:<job>, bfq:<job> are built from it (same slot)
  ARGV[2] job id
  ARGV[3] max concurrent backfill runs of the job
  ARGV[4] who asks (the job's log of runs by hand, acts:<job>, gets a 'backfill')
  ARGV[5] the window asked for, for the log
  ARGV[6] the band of the runs' priority ('^l' low, '' normal, '^h' high; core/queues.py):
          kept on the job as 'bfb' for the ticks released later
  ARGV[7] pace: ms between two releases (0: as places free). Paced, one is released now
          and the job joins the shard's bfpace ZSET (job -> when its next is due), which
          the owner's pacer (release_paced.lua) works through
  ARGV[8..] ticks (ms)

  Keys built from the shard key base (each in KEYS' hash slot): acts:<id>, bfpace,
    bfq:<id>, cnt:<id>, job:<id>, run:<id>, runs:<id>.

  Returns {1, queued, already, released, queues}: ticks newly queued, ticks that had a run
  or were queued already, runs started now, the queues they went to (lib/queues.lua); {-1} no such job; {-2} the job is deleted.
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include queues
-- @include changes
-- @include live
local job_key, ready_key = KEYS[1], KEYS[2]
local base, job = ARGV[1], ARGV[2]

-- @include backfill

local status, refused = live_status(job_key)
if refused then
  return refused
end
local now = server_now_ms()
local queue_key = base .. 'bfq:' .. job
local queued, already = 0, 0
for i = 8, #ARGV do
  local tick = ARGV[i]
  if rcall('EXISTS', base .. 'run:' .. run_id(job, tick, '1')) == 1
      or rcall('ZSCORE', queue_key, tick) then
    already = already + 1
  else
    rcall('ZADD', queue_key, tick, tick)
    queued = queued + 1
  end
end
local pace = tonumber(ARGV[7])
rcall('HSET', job_key, 'bfm', ARGV[3], 'bfb', ARGV[6], 'bfp', pace)
-- the stream its runs go to joins the shard's set of queues (reclaim and the wake-up check
-- look at it; the worker's completion that releases the next tick may not write the set)
local stream = string.gsub(rcall('HGET', job_key, 'q') or '', '%^.*$', '') .. ARGV[6]
if stream ~= '' then
  rcall('SADD', base .. 'queues', stream)
end
log_change(base .. 'acts:' .. job, 'backfill', ARGV[4], '',
  ARGV[5] .. ': ' .. queued .. ' ticks queued, ' .. already .. ' had runs')
local released
if pace > 0 then
  released = backfill_release(base, ready_key, job, now, 1)
  if rcall('ZCARD', queue_key) > 0 and not rcall('ZSCORE', base .. 'bfpace', job) then
    rcall('ZADD', base .. 'bfpace', now + pace, job)
  end
else
  released = backfill_release(base, ready_key, job, now)
end
return {1, queued, already, released, woken_queues()}
