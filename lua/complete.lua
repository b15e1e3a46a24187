#!lua
--[[
  A worker reports a run's outcome. Applied only if the caller still holds the run:
  the stream entry is pending on this worker and the run's delivery token matches.
  A stale completion is refused and counted on the run, never applied.

  KEYS[1] ready   STREAM of fired runs
  KEYS[2] run     HASH the run record
  KEYS[3] output  STRING the run's captured output
  ARGV[1] consumer group
  ARGV[2] stream entry id
  ARGV[3] worker id
  ARGV[4] delivery token
  ARGV[5] terminal state: succeeded | failed
  ARGV[6] exit code, or '' when the process did not exit on its own
  ARGV[7] reason, or ''
  ARGV[8] output (already capped by the worker)

  Returns {1, now_ms}; {0} when this same completion was applied before (a retry);
  {-1} when the run does not exist; {-2} when the caller no longer
  holds it (recorded as a superseded execution in the run's 'sx' counter).
]]
local rcall = redis.call
local ready_key, run_key, out_key = KEYS[1], KEYS[2], KEYS[3]
local group, eid, worker = ARGV[1], ARGV[2], ARGV[3]

local run = rcall('HMGET', run_key, 'st', 'w', 'dt')
if not run[1] then
  return {-1}
end
if run[1] == ARGV[5] and run[2] == worker and run[3] == ARGV[4] then
  return {0}  -- this very completion was applied already (a retry after a lost reply)
end
local pending = rcall('XPENDING', ready_key, group, eid, eid, 1)
local holds = run[1] == 'running' and run[2] == worker and run[3] == ARGV[4]
  and #pending == 1 and pending[1][2] == worker
if not holds then
  rcall('HINCRBY', run_key, 'sx', 1)
  return {-2}
end

local t = rcall('TIME')
local now = t[1] .. string.format('%03d', math.floor(t[2] / 1000))
rcall('XACK', ready_key, group, eid)
rcall('XDEL', ready_key, eid)
rcall('HSET', run_key, 'st', ARGV[5], 'f', now, 'x', ARGV[6], 'r', ARGV[7])
if ARGV[8] ~= '' then
  rcall('SET', out_key, ARGV[8])
end
return {1, now}
