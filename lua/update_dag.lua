#!lua
--[[
  Replace a DAG's definition (PUT): its spec, timing, limits and topology as its next
  version, its task jobs created, changed or retired, its timer entry re-scored.
  Optimistic: the caller read version V; if the DAG moved on nothing is written.

  DAG runs still open (running or queued) keep the topology they opened on: if any do,
  the current one is kept first as dagv:<dag>:<tv> with dagvn:<dag>:<tv> = how many (lib/dag.lua),
  and the last of them to end deletes it. A retired task's job stays, status 'deleted',
  with its runs; a task that comes back is the same job again.

  KEYS[1] dag      HASH the DAG (job:<dag>)
  KEYS[2] timer    ZSET job_id -> next fire (ms)
  KEYS[3] segs     LIST the DAG's schedule segments
  KEYS[4] versions HASH the DAG's earlier definitions (lib/versions.lua)
  KEYS[5] changes  STREAM the DAG's change log (lib/changes.lua)
  ARGV[1] shard key base; job:<dag>.<task>, dagv:<dag>:<tv>, dagvn:<dag>:<tv> and cnt:<dag> (its counters,
          lib/counters.lua) are built from it
  ARGV[2] dag id
  ARGV[3] version the caller read
  ARGV[4] spec JSON
  ARGV[5] timing JSON
  ARGV[6] next fire (ms), '' none, '=' keep the timer entry as it is
  ARGV[7] '1' when the timing changed (segment roll-over), else '0'
  ARGV[8] max active runs
  ARGV[9] stall SLA (ms)
  ARGV[10] catch-up code: a | l | n
  ARGV[11] task names, csv, dependencies first
  ARGV[12] root task names, csv
  ARGV[13] who makes the change (the new version's 'by')
  ARGV[14] wake channel
  ARGV[15] shard number
  ARGV[16..] items of 7 per task: name, dependencies csv, downstream csv, trigger rule
          code, task spec JSON, lease (ms), queue ('' the default; lib/queues.lua)

  Returns {1, version, now_ms}; {-1} no such DAG; {-2} deleted; {-3} version moved on.
]]
local rcall = redis.call
-- @include live
-- @include clock
-- @include changes
-- @include segments
-- @include versions
-- @include counters
-- @include jobqueue
local dag_key, timer_key, segs_key = KEYS[1], KEYS[2], KEYS[3]
local base, dag = ARGV[1], ARGV[2]
local cur = rcall('HMGET', dag_key, 'status', 'version', 'kind', 'tasks', 'tv', 'ntv', 'roots',
  'sla')
local refusal = dag_refusal(cur, ARGV[3])
if refusal then
  return refusal
end
local now = server_now_ms()
local function split(csv)
  local out = {}
  for item in string.gmatch(csv or '', '[^,]+') do
    out[#out + 1] = item
  end
  return out
end
local old_tasks = split(cur[4])
local tv = tonumber(cur[5] or '1')
local open = counter(base, dag, 'ntv')
if open > 0 then
  local kept = base .. 'dagv:' .. dag .. ':' .. tv
  rcall('HSET', kept, 'tasks', cur[4], 'roots', cur[7], 'sla', cur[8])
  rcall('SET', base .. 'dagvn:' .. dag .. ':' .. tv, open)  -- counted down by completions
  for _, t in ipairs(old_tasks) do
    local f = rcall('HMGET', dag_key, 'd:' .. t, 'w:' .. t, 'g:' .. t)
    local job = rcall('HMGET', base .. 'job:' .. dag .. '.' .. t, 'spec', 'lease')
    rcall('HSET', kept, 'd:' .. t, f[1] or '', 'w:' .. t, f[2] or '', 'g:' .. t, f[3] or 's',
      's:' .. t, job[1] or '', 'l:' .. t, job[2] or '30000')
  end
end
for _, t in ipairs(old_tasks) do
  rcall('HDEL', dag_key, 'd:' .. t, 'w:' .. t, 'g:' .. t)
end
local score = rcall('ZSCORE', timer_key, dag)
if ARGV[7] == '1' then
  materialize_segments(dag_key, segs_key)  -- before 'timing' is overwritten
end
keep_version(dag_key, KEYS[4])
local version = rcall('HINCRBY', dag_key, 'version', 1)
rcall('HSET', dag_key, 'spec', ARGV[4], 'timing', ARGV[5], 'updated', now, 'by', ARGV[13],
  'mar', ARGV[8], 'sla', ARGV[9], 'cu', ARGV[10], 'tasks', ARGV[11], 'roots', ARGV[12],
  'tv', tv + 1, 'ntv', 0)
rcall('HDEL', base .. 'cnt:' .. dag, 'ntv')  -- no run is open on the new topology
local kept_names = {}
for i = 16, #ARGV, 7 do
  local name = ARGV[i]
  kept_names[name] = true
  rcall('HSET', dag_key, 'd:' .. name, ARGV[i + 1], 'w:' .. name, ARGV[i + 2],
    'g:' .. name, ARGV[i + 3])
  local task_key = base .. 'job:' .. dag .. '.' .. name
  local was = rcall('HMGET', task_key, 'spec', 'status')
  if not was[1] then
    rcall('HSET', task_key, 'spec', ARGV[i + 4], 'dag', dag, 'status', 'active',
      'created', now, 'updated', now, 'version', 1, 'lease', ARGV[i + 5])
  elseif was[1] ~= ARGV[i + 4] or was[2] ~= 'active' then
    rcall('HINCRBY', task_key, 'version', 1)
    rcall('HSET', task_key, 'spec', ARGV[i + 4], 'status', 'active', 'updated', now,
      'lease', ARGV[i + 5])
  end
  set_job_queue(base, task_key, ARGV[i + 6], not was[1])
end
for _, t in ipairs(old_tasks) do
  if not kept_names[t] then
    rcall('HSET', base .. 'job:' .. dag .. '.' .. t, 'status', 'deleted', 'updated', now)
  end
end
log_change(KEYS[5], 'update', ARGV[13], version, '')
local new = ARGV[6]
if cur[1] == 'paused' then
  new = ''  -- a paused DAG stays paused; resuming plans it from then
elseif new == '=' then
  new = score or ''
end
if new == '' then
  rcall('ZREM', timer_key, dag)
else
  rcall('ZADD', timer_key, new, dag)
end
if ARGV[7] == '1' and cur[1] == 'active' then
  rcall('RPUSH', segs_key, 'c|' .. (score or '') .. '|' .. now)
  if new ~= '' then
    rcall('RPUSH', segs_key, 'o|' .. new .. '|' .. ARGV[5])
  end
end
rcall('PUBLISH', ARGV[14], ARGV[15])
return {1, version, now}
