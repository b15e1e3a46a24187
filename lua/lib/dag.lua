-- DAG bookkeeping, shared by fire, trigger_dag, complete and reclaim. A whole DAG lives in
-- one shard (ARCHITECTURE.md, Keys), so opening a DAG run, releasing a task and settling a finished one
-- are each part of one atomic script: a downstream task is released exactly once, decided
-- on the primary, never by polling. Every change of a task run or a DAG run is an event
-- (lib/events.lua, which callers include first). Task runs go to their task's queue
-- (lib/queues.lua, which callers include first too).
--
-- The DAG's hash is job:<dag> (it has a timer entry like a job): 'tasks' (names, csv, in
-- order), 'roots', 'mar' (max active runs), 'cu' (catch-up a|l|n),
-- 'sla' (stall SLA, ms), and per task 'd:<t>' (dependencies, csv), 'w:<t>' (downstream,
-- csv), 'g:<t>' (trigger rule: s all_success | d all_done | o one_failed | n none_failed).
-- A DAG run is dagrun:<dag>:<tick> ('t<n>' for a manual one): 'st', 's' (scheduled_for),
-- 'c', 'b', 'f', 'n' (tasks not yet terminal), 'nf' (tasks failed for good), 'm' (manual),
-- and per task 't:<t>' (w waiting | q released | s succeeded | f failed | u skipped as
-- upstream_failed, which counts as a failure downstream, recursively | k skipped otherwise),
-- 'r:<t>' (its latest run id), 'a:<t>' (released at). Its id is listed in runs:<dag>.
-- Task runs are <dag>.<task>:<tick>:<attempt> with 'd' = the DAG run id.
-- Its counters (lib/counters.lua, which callers include first) are 'nact' (DAG runs
-- active) and 'ntv' (see below).
-- Versions (update_dag.lua): the DAG's 'tv' is its topology's version and 'ntv' how many
-- DAG runs opened on it are still open; a DAG run records the 'tv' it opened on and keeps
-- it to the end. When a change replaces a topology that open runs still use, it is kept
-- as dagv:<dag>:<tv> (the same 'roots', 'tasks', 'd:', 'w:', 'g:' fields, plus 's:<t>'
-- and 'l:<t>', each task's spec JSON and lease); dagvn:<dag>:<tv> counts its runs still
-- open, the last of them to end lists it in dagvgc:<dag>, and the next DAG run a node
-- opens deletes it. So an open run finishes on the tasks, wiring and commands it
-- started with. What a task runs is a node's alone to write (store/acl.py): the kept
-- versions, and dagrunv:<drid> ('tv' and 'args' the DAG run was opened with; the
-- DAG run's own hash, which a worker's completion writes, only shows them).
-- Callers define rcall (and include lib/skips). Functions that can put task runs on the
-- ready stream return how many they put (the caller publishes the ready channel then).
-- Keys it builds from the shard key base (each script's hash slot): dagq:<dag>, dagrun:,
-- dagrunv:, dagv:, dagvgc:, dagvn:, dagwait, job:<id>, run:<id>, runs:<job>.
-- @include runids
-- @include counters
-- @include events
-- @include queues
-- @include skips
-- @include outcomes

local function dag_split(csv)
  local out = {}
  if csv and csv ~= '' then
    for item in string.gmatch(csv, '[^,]+') do
      out[#out + 1] = item
    end
  end
  return out
end

-- What a DAG run was opened with: its topology's version and its args (false: none), from
-- dagrunv:<drid>; a DAG run opened before that key was kept reads its own hash.
local function dag_given(base, drid)
  local given = rcall('HMGET', base .. 'dagrunv:' .. drid, 'tv', 'args')
  if not given[1] then
    given = rcall('HMGET', base .. 'dagrun:' .. drid, 'tv', 'args')
  end
  return given[1], given[2]
end

-- Where the topology of a DAG run is read: the DAG's hash while the run is on its current
-- version (or on none: opened before versions were kept), else the kept version's hash.
local function dag_topo(base, dag, drid)
  local dag_key = base .. 'job:' .. dag
  local tv = dag_given(base, drid)
  if tv and tv ~= (rcall('HGET', dag_key, 'tv') or '1') then
    local kept = base .. 'dagv:' .. dag .. ':' .. tv
    if rcall('EXISTS', kept) == 1 then
      return kept
    end
  end
  return dag_key
end

-- A DAG run ended (finished, or superseded while queued): it no longer holds its version.
local function dag_release_version(base, dag, drid)
  local dag_key = base .. 'job:' .. dag
  local tv = dag_given(base, drid)
  if not tv then
    return
  end
  if tv == (rcall('HGET', dag_key, 'tv') or '1') then
    if counter(base, dag, 'ntv') > 0 then
      counter_add(base, dag, 'ntv', -1)
    end
  else
    local open_key = base .. 'dagvn:' .. dag .. ':' .. tv
    local left
    if rcall('EXISTS', open_key) == 1 then
      left = rcall('DECR', open_key)
    else  -- kept before its count moved out of it (its 'open' field), or already gone
      local open = rcall('HGET', base .. 'dagv:' .. dag .. ':' .. tv, 'open')
      if not open then
        return
      end
      left = tonumber(open) - 1
      rcall('SET', open_key, left)
    end
    if left <= 0 then  -- no run uses it: a node deletes it (a worker may not)
      rcall('DEL', open_key)
      rcall('SADD', base .. 'dagvgc:' .. dag, tv)
    end
  end
end

-- A node deletes the kept versions of a DAG that no open run uses any more.
local function dag_drop_versions(base, dag)
  local done_key = base .. 'dagvgc:' .. dag
  local done = rcall('SMEMBERS', done_key)
  for _, tv in ipairs(done) do
    if tonumber(rcall('GET', base .. 'dagvn:' .. dag .. ':' .. tv) or '0') <= 0 then
      rcall('DEL', base .. 'dagv:' .. dag .. ':' .. tv)
    end
  end
  if #done > 0 then
    rcall('DEL', done_key)
  end
end

-- The run id of a task's next run in a DAG run, and the run before it: its first attempt;
-- or, for a task a repair set back to waiting (lua/repair_dag_run.lua), the attempt after
-- its latest, which then points at the new one ('nx'), as a retry's does.
local function dag_next_rid(base, dag, drid, tick, task)
  local prev = rcall('HGET', base .. 'dagrun:' .. drid, 'r:' .. task)
  if prev then
    return next_attempt(prev), prev
  end
  return run_id(dag .. '.' .. task, tick, '1'), nil
end

-- A task's run in a DAG run: created, put on the ready stream, watched for stalls.
-- Returns 1 when the run was put on the stream, 0 when it existed already.
local function dag_release(base, ready, dag, drid, tick, s, task, now, sla)
  local released = 0
  local rid, prev = dag_next_rid(base, dag, drid, tick, task)
  local run_key = base .. 'run:' .. rid
  if rcall('EXISTS', run_key) == 0 then
    if prev then
      rcall('HSET', base .. 'run:' .. prev, 'nx', rid)
    end
    rcall('HSET', run_key, 'st', 'scheduled', 'c', now, 'd', drid)
    if s ~= tick then
      rcall('HSET', run_key, 's', s)  -- a manual DAG run: its tick is 't<n>'
    end
    local q = rcall('HGET', base .. 'job:' .. dag .. '.' .. task, 'q')  -- lib/queues.lua
    if q then
      rcall('HSET', run_key, 'q', q)
    end
    rcall('ZADD', base .. 'runs:' .. dag .. '.' .. task, s, rid)
    enqueue(base, rid, q)
    rcall('ZADD', base .. 'dagwait', tonumber(now) + tonumber(sla), rid)
    emit_event(base, rid, '', 'scheduled', '', '')
    released = 1
  end
  rcall('HSET', base .. 'dagrun:' .. drid, 't:' .. task, 'q', 'r:' .. task, rid, 'a:' .. task, now)
  return released
end

-- A task that will not run in this DAG run: its record says why.
local function dag_skip(base, dag, drid, tick, s, task, now, reason)
  local rid, prev = dag_next_rid(base, dag, drid, tick, task)
  local run_key = base .. 'run:' .. rid
  if rcall('EXISTS', run_key) == 0 then
    if prev then
      rcall('HSET', base .. 'run:' .. prev, 'nx', rid)
    end
    rcall('HSET', run_key, 'st', 'skipped', 'c', now, 'f', now, 'r', reason, 'd', drid)
    if s ~= tick then
      rcall('HSET', run_key, 's', s)
    end
    rcall('ZADD', base .. 'runs:' .. dag .. '.' .. task, s, rid)
    emit_event(base, rid, '', 'skipped', '', reason)
  end
  local code = reason == 'upstream_failed' and 'u' or 'k'
  rcall('HSET', base .. 'dagrun:' .. drid, 't:' .. task, code, 'r:' .. task, rid)
end

-- A DAG run starts: its root tasks are released. Returns how many runs went on the stream.
local function dag_start(base, ready, dag, drid, now)
  local released = 0
  local run_key = base .. 'dagrun:' .. drid
  local info = rcall('HMGET', dag_topo(base, dag, drid), 'roots', 'sla')
  local s = rcall('HGET', run_key, 's')
  local tick = string.match(drid, ':([^:]+)$')
  rcall('HSET', run_key, 'st', 'running', 'b', now)
  emit_event(base, drid, 'queued', 'running', '', '')
  for _, root in ipairs(dag_split(info[1])) do
    released = released + dag_release(base, ready, dag, drid, tick, s, root, now, info[2])
  end
  return released
end

-- Start queued DAG runs while the DAG has room under max_active_runs; returns how many
-- task runs went on the stream.
local function dag_promote(base, ready, dag, now)
  local released = 0
  local dag_key = base .. 'job:' .. dag
  local active = counter(base, dag, 'nact')
  local limit = tonumber(rcall('HGET', dag_key, 'mar') or '1')
  while active < limit do
    local head = rcall('ZPOPMIN', base .. 'dagq:' .. dag)
    if #head == 0 then
      break
    end
    if rcall('HGET', base .. 'dagrun:' .. head[1], 'st') == 'queued' then
      active = counter_add(base, dag, 'nact', 1)
      released = released + dag_start(base, ready, dag, head[1], now)
    end
  end
  return released
end

-- Every task is terminal: the DAG run ends, and frees its slot (a queued run may start:
-- returns how many task runs went on the stream).
local function dag_finish(base, ready, dag, drid, now)
  local run_key = base .. 'dagrun:' .. drid
  local failed = tonumber(rcall('HGET', run_key, 'nf') or '0') > 0
  rcall('HSET', run_key, 'st', failed and 'failed' or 'succeeded', 'f', now)
  dag_release_version(base, dag, drid)
  emit_event(base, drid, 'running', failed and 'failed' or 'succeeded', '', '')
  note_outcome(base, dag, drid, failed and 'f' or 's', now)
  counter_add(base, dag, 'nact', -1)
  return dag_promote(base, ready, dag, now)
end

-- Open the DAG run of a tick ('t<n>' and manual for a manual trigger) unless it exists.
-- Returns code, dag run id, task runs put on the stream: code 1 started, 2 queued
-- (max_active_runs reached), 0 it existed, 3 the tick was skipped (catch-up 'none' with no
-- room; a skip record says so).
local function dag_open(base, ready, dag, tick, s, now, manual)
  local drid = dag .. ':' .. tick
  local run_key = base .. 'dagrun:' .. drid
  if rcall('EXISTS', run_key) == 1 then
    return 0, drid, 0
  end
  local dag_key = base .. 'job:' .. dag
  local info = rcall('HMGET', dag_key, 'tasks', 'mar', 'cu', 'tv')
  local full = counter(base, dag, 'nact') >= tonumber(info[2] or '1')
  if full and not manual then
    if info[3] == 'n' then
      record_skip(base, dag, tick, tick, 1, 'max_active_runs', now)
      return 3, drid, 0
    elseif info[3] == 'l' then
      -- only the latest tick waits: older queued runs are superseded, and say so
      local queue_key = base .. 'dagq:' .. dag
      for _, queued in ipairs(rcall('ZRANGE', queue_key, 0, -1)) do
        local queued_key = base .. 'dagrun:' .. queued
        if rcall('HGET', queued_key, 'm') ~= '1' then
          rcall('HSET', queued_key, 'st', 'skipped', 'f', now, 'rs', 'superseded by ' .. drid)
          dag_release_version(base, dag, queued)
          emit_event(base, queued, 'queued', 'skipped', '', 'superseded')
          rcall('ZREM', queue_key, queued)
        end
      end
    end
  end
  dag_drop_versions(base, dag)
  local tasks = dag_split(info[1])
  local fields = {'st', 'queued', 's', s, 'c', now, 'n', #tasks, 'nf', 0, 'tv', info[4] or '1'}
  rcall('HSET', base .. 'dagrunv:' .. drid, 'tv', info[4] or '1')
  counter_add(base, dag, 'ntv', 1)
  if manual then
    fields[#fields + 1] = 'm'
    fields[#fields + 1] = '1'
  end
  for _, task in ipairs(tasks) do
    fields[#fields + 1] = 't:' .. task
    fields[#fields + 1] = 'w'
  end
  rcall('HSET', run_key, unpack(fields))
  rcall('ZADD', base .. 'runs:' .. dag, s, drid)
  emit_event(base, drid, '', 'queued', '', manual and 'manual' or '')
  if full then
    rcall('ZADD', base .. 'dagq:' .. dag, s, drid)
    return 2, drid, 0
  end
  counter_add(base, dag, 'nact', 1)
  return 1, drid, dag_start(base, ready, dag, drid, now)
end

-- What a trigger rule makes of a waiting task, given its dependencies' states so far:
-- 'release', 'skip' (with a reason), or nil (wait).
local function dag_rule(rule, ok, failed, skipped, pending)
  if rule == 'd' then
    if pending == 0 then
      return 'release'
    end
  elseif rule == 'o' then
    if failed > 0 then
      return 'release'
    elseif pending == 0 then
      return 'skip', 'no upstream task failed (one_failed)'
    end
  elseif rule == 'n' then
    if failed > 0 then
      return 'skip', 'upstream_failed'
    elseif pending == 0 then
      return 'release'
    end
  else
    if failed > 0 then
      return 'skip', 'upstream_failed'
    elseif skipped > 0 then
      return 'skip', 'upstream_skipped'
    elseif pending == 0 then
      return 'release'
    end
  end
  return nil
end

-- What a task's trigger rule makes of it now, from its dependencies' states in the run:
-- 'release', 'skip' (with a reason), or nil (wait).
local function dag_verdict(run_key, dag_key, task)
  local ok, failed, skipped, pending = 0, 0, 0, 0
  for _, dep in ipairs(dag_split(rcall('HGET', dag_key, 'd:' .. task))) do
    local st = rcall('HGET', run_key, 't:' .. dep)
    if st == 's' then
      ok = ok + 1
    elseif st == 'f' or st == 'u' then
      failed = failed + 1
    elseif st == 'k' then
      skipped = skipped + 1
    else
      pending = pending + 1
    end
  end
  return dag_rule(rcall('HGET', dag_key, 'g:' .. task), ok, failed, skipped, pending)
end

-- Tasks of a DAG run that just ended (`work`): decide each waiting downstream task by its
-- trigger rule, releasing or skipping it (a skip settles its own downstream in turn).
-- Returns how many task runs went on the ready stream and the count of tasks left.
local function dag_cascade(base, ready, drid, dag, tick, dag_key, work, now)
  local run_key = base .. 'dagrun:' .. drid
  local released, left = 0, nil
  local s, sla = rcall('HGET', run_key, 's'), nil
  while #work > 0 do
    local done = table.remove(work)
    for _, down in ipairs(dag_split(rcall('HGET', dag_key, 'w:' .. done))) do
      -- a task added to the DAG after this run opened is not part of it (no field)
      if rcall('HGET', run_key, 't:' .. down) == 'w' then
        local verdict, reason = dag_verdict(run_key, dag_key, down)
        if verdict == 'release' then
          sla = sla or rcall('HGET', dag_key, 'sla')
          released = released + dag_release(base, ready, dag, drid, tick, s, down, now, sla)
        elseif verdict == 'skip' then
          dag_skip(base, dag, drid, tick, s, down, now, reason)
          left = rcall('HINCRBY', run_key, 'n', -1)
          work[#work + 1] = down
        end
      end
    end
  end
  return released, left
end

-- A task of a DAG run ended for good (outcome 's' succeeded or 'f' failed): decide each
-- waiting downstream task by its trigger rule, releasing or skipping it (a skip settles
-- its own downstream in turn), and end the DAG run when nothing is left. Idempotent: a
-- task settles once. Returns how many task runs went on the ready stream.
local function dag_settle(base, ready, drid, task, outcome, now)
  local run_key = base .. 'dagrun:' .. drid
  if rcall('HGET', run_key, 't:' .. task) ~= 'q' then
    return 0
  end
  local dag, tick = string.match(drid, '^([^:]+):([^:]+)$')
  local dag_key = dag_topo(base, dag, drid)
  rcall('HSET', run_key, 't:' .. task, outcome)
  if outcome == 'f' then
    rcall('HINCRBY', run_key, 'nf', 1)
  end
  local left = rcall('HINCRBY', run_key, 'n', -1)
  local released, after = dag_cascade(base, ready, drid, dag, tick, dag_key, {task}, now)
  left = after or left
  if left <= 0 then
    released = released + dag_finish(base, ready, dag, drid, now)
  end
  return released
end

-- The DAG run of a task run, and the task's name, from the run id and its 'd' field.
local function dag_task_of(rid)
  return string.match(rid, '^[^.:]+%.([^:]+):')
end

-- A DAG run opened now by a trigger rather than its clock (an event, an upstream's
-- outcome): tick 't<n>' with n the DAG's trigger count, its args and its cause kept on
-- the DAG run. Returns its id.
local function dag_triggered(base, ready, dag_key, dag, cause, args, now)
  local n = rcall('HINCRBY', dag_key, 'triggers', 1)
  local _, drid = dag_open(base, ready, dag, 't' .. n, now, now, true)
  if args ~= '' then
    rcall('HSET', base .. 'dagrun:' .. drid, 'args', args)
    rcall('HSET', base .. 'dagrunv:' .. drid, 'args', args)
  end
  rcall('HSET', base .. 'dagrun:' .. drid, 'cause', cause)
  return drid
end
