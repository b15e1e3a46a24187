#!lua
--[[
  A worker writes what its running commands of one shard printed so far, so a user can
  follow a run's output while it runs (GET /api/v1/runs/{id}/output/stream). Written only
  where the caller still holds the run: running on this worker under this delivery token,
  its stream entry pending on it. The completion writes the whole output again at the end.

  KEYS[1] ready   STREAM of fired runs (its pending entries are the leases; a run of
                  another queue than the default is on its queue's, lib/queues.lua)
  ARGV[1] consumer group
  ARGV[2] worker id
  ARGV[3] shard key base; run:<id> ('ol': bytes printed in all so far), out:<id> (the
          output's tail), job:<id> and cnt:<id> (its job's output count, lib/outquota.lua)
          keys are built from it (same hash slot)
  ARGV[4] output quota of a job, bytes kept in Redis over all its runs (0: none)
  ARGV[5] output quota of this shard, bytes (0: none; lib/outquota.lua, which also
          builds job:<id> and stats from the base)
  ARGV[6..] items of 6: entry id, run id, delivery token, bytes printed in all, mode (a
          append these bytes | s set them as the whole tail), the bytes

  Returns {code1, code2, ...}: 1 written; -2 the caller no longer holds the run (nothing
  written).
]]
local rcall = redis.call
local group, worker, base = ARGV[1], ARGV[2], ARGV[3]
-- @include holder
-- @include runids
-- @include outquota
-- @include queues
local job_quota, shard_quota = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
for i = 6, #ARGV, 6 do
  local eid, rid, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'w', 'dt', 'e', 'q')
  local pending = rcall('XPENDING', ready_of(base, run[5]), group, eid, eid, 1)
  if holds_run(run, 'running', worker, token, eid)
      and #pending == 1 and pending[1][2] == worker then
    local cut_by = keep_output(base, job_of_run(rid),
      base .. 'out:' .. rid, ARGV[i + 5], ARGV[i + 4] == 'a', job_quota, shard_quota)
    rcall('HSET', run_key, 'ol', ARGV[i + 3])
    if cut_by then
      rcall('HSET', run_key, 'oq', cut_by)
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = -2
  end
end
return out
