#!lua
--[[
  A job registered with depends_on joins the DAG of its dependencies as a new task: the
  DAG's topology gains it (its dependencies list it downstream) and its task job is
  created. Optimistic: the caller read DAG version V; if the DAG moved on nothing is
  written. DAG runs already open are not changed: the task runs from the next one.

  KEYS[1] dag     HASH the DAG (job:<dag>)
  KEYS[2] task    HASH the new task's job (job:<dag>.<task>)
  KEYS[3] versions HASH the DAG's earlier definitions (lib/versions.lua)
  KEYS[4] changes STREAM the DAG's change log (lib/changes.lua)
  ARGV[1] version the caller read
  ARGV[2] task name
  ARGV[3] dependencies (task names, csv)
  ARGV[4] trigger rule code (s | d | o | n)
  ARGV[5] task spec JSON
  ARGV[6] lease (ms)
  ARGV[7] the DAG's spec JSON with the task added
  ARGV[8] dag id
  ARGV[9] who adds it (the new version's 'by')
  ARGV[10] the task's queue ('' the default; lib/queues.lua)

  Returns {1, now_ms}; {-1} no such DAG; {-2} deleted; {-3} version moved on; {-4} the
  task name is taken; {-5, i} dependency i (1-based) is not a task of the DAG.
]]
local rcall = redis.call
-- @include live
-- @include clock
-- @include changes
-- @include versions
-- @include jobqueue
local dag_key, task_key = KEYS[1], KEYS[2]
local name = ARGV[2]
local cur = rcall('HMGET', dag_key, 'status', 'version', 'kind')
local refusal = dag_refusal(cur, ARGV[1])
if refusal then
  return refusal
end
if rcall('EXISTS', task_key) == 1 or rcall('HEXISTS', dag_key, 'd:' .. name) == 1 then
  return {-4}
end
local deps = {}
for dep in string.gmatch(ARGV[3], '[^,]+') do
  deps[#deps + 1] = dep
  if rcall('HEXISTS', dag_key, 'd:' .. dep) == 0 then
    return {-5, #deps}
  end
end
local now = server_now_ms()
for _, dep in ipairs(deps) do
  local down = rcall('HGET', dag_key, 'w:' .. dep)
  rcall('HSET', dag_key, 'w:' .. dep, (down and down ~= '') and (down .. ',' .. name) or name)
end
keep_version(dag_key, KEYS[3])
rcall('HSET', dag_key, 'tasks', rcall('HGET', dag_key, 'tasks') .. ',' .. name,
  'd:' .. name, ARGV[3], 'w:' .. name, '', 'g:' .. name, ARGV[4], 'spec', ARGV[7],
  'updated', now, 'by', ARGV[9])
local version = rcall('HINCRBY', dag_key, 'version', 1)
log_change(KEYS[4], 'add_task', ARGV[9], version, name)
rcall('HSET', task_key, 'spec', ARGV[5], 'dag', ARGV[8],
  'status', 'active', 'created', now, 'updated', now, 'version', 1, 'lease', ARGV[6])
set_job_queue(string.sub(task_key, 1, -5 - #ARGV[8] - 1 - #name), task_key, ARGV[10], true)
return {1, now}
