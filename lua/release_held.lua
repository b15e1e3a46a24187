#!lua
--[[
  The owner's release of events held for paused jobs (deliver_event.lua): a job active
  again gets a run for each delivery it holds, in order (a DAG a DAG run), as long as its
  runs are not queued past its backlog bound ('blc' on the job, lua/deliver_event.lua);
  a job deleted (or gone) drops them; a job still paused keeps them.

  KEYS[1] evheldjobs SET the shard's jobs holding deliveries
  KEYS[2] epoch      STRING the shard's fencing token
  KEYS[3] ready      STREAM of fired runs
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; job:<id>, evheld:<id>, idem:<id>:<key>, run:<id>, runs:<id>,
          args:<id>:t<n>, the events stream and lib/dag's keys (dagv:<dag>:<tv> (with
          dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>)) are built from it

  Keys built from the shard key base (each in KEYS' hash slot): cnt:<id>, dagq:<id>,
    dagrun:<id>, dagwait, skips:<id>, outq.
  ARGV[3] how many jobs to look at, at most

  Returns {1, released, dropped, queues}: released a flat list cause, run id, ... (a
  cause: 'event:<id>' or 'after:<run id>', lua/deliver_event.lua); dropped a flat list
  cause, job, ... of those whose job was deleted; or {-1} when the caller's epoch is
  stale.
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include events
-- @include queues
-- @include triggered
-- @include backlog
local held_jobs_key, epoch_key, ready_key = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[2]

-- @include dag
if rcall('GET', epoch_key) ~= ARGV[1] then
  return {-1}
end
local now = server_now_ms()
local released, dropped = {}, {}
local looked = 0
for _, job in ipairs(rcall('SMEMBERS', held_jobs_key)) do
  looked = looked + 1
  if looked > tonumber(ARGV[3]) then
    break
  end
  local job_key = base .. 'job:' .. job
  local held_key = base .. 'evheld:' .. job
  local status = rcall('HGET', job_key, 'status')
  if status ~= 'paused' then
    local count, age = backlog_bounds(rcall('HGET', job_key, 'blc'))
    for _, entry in ipairs(rcall('LRANGE', held_key, 0, -1)) do
      if status == 'active' and count and backlogged(base, job, count, age, tonumber(now)) then
        break  -- its runs queued past its bound again: the rest are held on, in order
      end
      local cause, key, args = string.match(entry, '^([^\n]*)\n([^\n]*)\n(.*)$')
      local idem_key = base .. 'idem:' .. job .. ':' .. key
      if status == 'active' then
        local rid
        if string.sub(job, 1, 4) == 'dag_' then  -- a DAG's: a DAG run (lib/dag.lua)
          rid = dag_triggered(base, ready_key, job_key, job, cause, args, now)
        else
          local detail = string.match(cause, '^[a-z]+')
          rid = make_triggered_run(base, job_key, job, args, now, cause, detail)
        end
        if rcall('EXISTS', idem_key) == 1 then  -- a key expired meanwhile stays so
          rcall('SET', idem_key, rid, 'KEEPTTL')
        end
        released[#released + 1] = cause
        released[#released + 1] = rid
      else
        rcall('DEL', idem_key)
        dropped[#dropped + 1] = cause
        dropped[#dropped + 1] = job
      end
      rcall('LPOP', held_key)
    end
    if rcall('LLEN', held_key) == 0 then
      rcall('SREM', held_jobs_key, job)
    end
  end
end
return {1, released, dropped, woken_queues()}
