#!lua flags=no-writes
--[[
  A worker's own pending entries of one shard (delivered to it, not acknowledged) whose
  run it still holds: what it must take up again after a reconnect or a restart under the
  same worker id, before reading anything new. Read-only.

  KEYS[1] ready   STREAM of fired runs
  ARGV[1] consumer group
  ARGV[2] worker id
  ARGV[3] shard key base; run:<id>, job:<id>, args:<job>:<tick>, dagrun:<id> and dagrunv:<id> keys are read from it (same
          hash slot)
  ARGV[4] how many pending entries to look at, at most (of each stream)
  ARGV[5..] the queues the worker serves ('' the default; none: the default only): each
          queue's stream is looked at (lib/queues.lua), and its concurrency keys' streams
          (those the shard's set of queues, queues, names)

  Returns the claim script's shape, 9 fields per run: entry id, run id, job spec JSON,
  scheduled_for (ms), attempt, delivery token, lease deadline (ms), now (ms), the run's
  args JSON (its own or its DAG run's; '': the job's).
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include queues
local group, worker, base = ARGV[1], ARGV[2], ARGV[3]
local out = {}
local now = server_now_ms()
local function pending_on(ready_key)
  local pending = redis.pcall('XPENDING', ready_key, group, '-', '+', ARGV[4], worker)
  if pending.err then
    return  -- no stream or group yet
  end
  for _, entry in ipairs(pending) do
    local eid = entry[1]
    local body = rcall('XRANGE', ready_key, eid, eid)
    local rid = body[1] and body[1][2][2]
    if rid then
      local run = rcall('HMGET', base .. 'run:' .. rid, 'st', 'w', 'dt', 's', 'l', 'args', 'd')
      if run[1] == 'running' and run[2] == worker then
        local job, tick, attempt = parse_run_id(rid)
        out[#out + 1] = eid
        out[#out + 1] = rid
        out[#out + 1] = rcall('HGET', base .. 'job:' .. job, 'spec') or ''
        out[#out + 1] = run[4] or tick
        out[#out + 1] = attempt
        out[#out + 1] = tonumber(run[3])
        out[#out + 1] = tonumber(run[5] or '0')
        out[#out + 1] = now
        -- the args as claim.lua reads them: where only nodes and the API write, else (a
        -- run from before those keys) the run's own record or its DAG run's
        local given = string.byte(tick, 1) == 116
          and rcall('GET', base .. 'args:' .. job .. ':' .. tick)
        local args = given or run[6]
        if not given and run[7] then
          args = args or rcall('HGET', base .. 'dagrunv:' .. run[7], 'args')
            or rcall('HGET', base .. 'dagrun:' .. run[7], 'args')
        end
        out[#out + 1] = args or ''
      end
    end
  end
end
local served = {}
if #ARGV < 5 then
  pending_on(KEYS[1])
  served[''] = true
end
for i = 5, #ARGV do
  pending_on(ready_of(base, ARGV[i]))
  served[ARGV[i]] = true
end
-- the streams of concurrency keys within those queues (the shard's queues set names them)
for _, q in ipairs(rcall('SMEMBERS', base .. 'queues')) do
  if string.find(q, '@', 1, true) and served[(split_key(q))] then
    pending_on(ready_of(base, q))
  end
end
return out
