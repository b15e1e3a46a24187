#!lua
--[[
  A worker claims up to N fired runs of one shard: read from the consumer group and move
  each run to running in the same atomic step. The pending entry is the lease.

  KEYS[1] ready       STREAM of fired runs of the default queue (each stream's group is
                      created here on first use)
  KEYS[2] reclaim_at  STRING when the owner next looks for lapsed leases (ms): lowered to
                      the earliest lease given here, and then published on the wake
                      channel as "r<shard>:<ms>", so the owner's reclaim waits for the
                      earliest lease deadline instead of polling
  ARGV[1] shard key base; run:<id>, job:<id>, args:<job>:<tick>, dagrun:<id>, dagrunv:<id> and dagv:<dag>:<tv> keys are
          built from it (same hash slot)
  ARGV[2] consumer group
  ARGV[3] worker id (the consumer)
  ARGV[4] how many runs at most
  ARGV[5] wake channel
  ARGV[6] shard number
  ARGV[7] a random number below 2^31 (the caller's, fresh each call): a delivery token is
          it times 1,000 plus the run's delivery count (mod 1,000), so it cannot be
          guessed from the run, and a new delivery's token never equals the last one's
  ARGV[8..] items of 2: a queue as stored ('' the default queue's normal band;
          core/queues.py) and how many runs at most to take from its stream; none: the
          default stream only. Each stream (lib/queues.lua) is read in turn until N runs
          are claimed, so the worker's order (its priorities, then its queues) holds.

  Returns a flat list, 9 fields per claimed run:
    entry id, run id, job spec JSON, scheduled_for (ms; '' when it is the run id's tick),
    attempt ('': the run id's), delivery token, lease deadline (ms), now (ms), the run's
    args JSON ('': the job's own; a DAG task's run takes its DAG run's).
  Run ids are <job>:<tick>:<attempt>: the caller reads both from the id rather than the
  script parsing every id (a pattern match costs ~3,000 instructions a run).
  The run records the job version it runs with ('v'). A DAG task's run whose DAG run
  opened on an earlier version of the DAG takes that version's spec (dagv:<dag>:<tv>). Entries whose run is gone or no
  longer scheduled are acknowledged and dropped. A DAG
  task's run leaves the shard's stall watch (dagwait) when claimed.
  A queue's claim takes its concurrency keys' streams in turn: each queue's ring and set
  of keys with runs (kring:<queue>, kset:<queue>, built from the base; lib/queues.lua).
]]
local rcall = redis.call
-- @include clock
-- @include events
-- @include queues
local reclaim_at_key = KEYS[2]
local base, group, worker = ARGV[1], ARGV[2], ARGV[3]
local nonce = tonumber(ARGV[7])
local wanted = tonumber(ARGV[4])

-- Up to `count` new entries of one stream, its group created on first use.
local function read(ready_key, count)
  local reply = redis.pcall('XREADGROUP', 'GROUP', group, worker, 'COUNT', count,
    'STREAMS', ready_key, '>')
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, 'NOGROUP') then
      rcall('XGROUP', 'CREATE', ready_key, group, '0', 'MKSTREAM')
      reply = rcall('XREADGROUP', 'GROUP', group, worker, 'COUNT', count,
        'STREAMS', ready_key, '>')
    else
      error(reply)  -- the error reply as it came (a table error is passed on as it is)
    end
  end
  return reply and reply[1][2]
end

local out = {}
local now, now_n = nil, nil
local earliest = nil
local events = {}
local n_out, n_events = 0, 0
local claimed_event = event_value('scheduled', 'running', worker, '')  -- the same for all
local n_claimed = 0
-- Claim up to `count` entries of one stream; returns how many entries it read.
local function claim_from(ready_key, count)
  local entries = read(ready_key, count)
  if not entries then
    return 0
  end
  if not now then
    now = server_now_ms()
    now_n = tonumber(now)
  end
  for _, entry in ipairs(entries) do
    local eid, rid = entry[1], entry[2][2]
    local run_key = base .. 'run:' .. rid
    local run = rcall('HMGET', run_key, 'st', 'dt', 's', 'd')
    if run[1] ~= 'scheduled' then
      rcall('XACK', ready_key, group, eid)
      rcall('XDEL', ready_key, eid)
    else
      n_claimed = n_claimed + 1
      -- run ids are <job>:<tick>:<attempt> (decode_claimed reads tick and attempt from it)
      local colon = string.find(rid, ':', 1, true)
      local job = string.sub(rid, 1, colon - 1)
      if string.byte(rid, colon + 1) == 116 then
        -- a manual run's tick is 't<n>' (trigger.lua): only those (and their retries) may
        -- carry args of their own, in args:<job>:<tick>, which only the API writes ('':
        -- none); a run triggered before that key was kept has them in its own record
        local tick = string.sub(rid, colon + 1, string.find(rid, ':', colon + 1, true) - 1)
        local given = rcall('GET', base .. 'args:' .. job .. ':' .. tick)
        if given then
          run[5] = given ~= '' and given or false
        else
          run[5] = rcall('HGET', run_key, 'args')
        end
      end
      local job_fields = rcall('HMGET', base .. 'job:' .. job, 'spec', 'lease', 'version')
      if run[4] then
        -- a DAG run on an earlier version of its DAG runs that version's command (lib/dag);
        -- which version, and its args, are in dagrunv:<drid>, which only nodes and the API
        -- write (a DAG run opened before that key was kept has them in its own hash)
        local dag, task = string.match(job, '^([^.]+)%.(.+)$')
        local dag_run = rcall('HMGET', base .. 'dagrunv:' .. run[4], 'tv', 'args')
        if not dag_run[1] then
          dag_run = rcall('HMGET', base .. 'dagrun:' .. run[4], 'tv', 'args')
        end
        local tv = dag_run[1]
        run[5] = run[5] or dag_run[2]
        if tv and tv ~= (rcall('HGET', base .. 'job:' .. dag, 'tv') or '1') then
          local kept = rcall('HMGET', base .. 'dagv:' .. dag .. ':' .. tv, 's:' .. task,
            'l:' .. task)
          if kept[1] then
            job_fields[1], job_fields[2] = kept[1], kept[2]
          end
        end
      end
      local lease = now_n + tonumber(job_fields[2] or '30000')
      if not earliest or lease < earliest then
        earliest = lease
      end
      local token = nonce * 1000 + (tonumber(run[2] or '0') % 1000 + 1) % 1000
      -- '%d', not Lua's own number formatting ('%.14g': ~3,000 instructions a number)
      rcall('HSET', run_key, 'st', 'running', 'w', worker, 'l', string.format('%d', lease),
        'b', now, 'dt', string.format('%d', token), 'e', eid, 'v', job_fields[3] or '')
      if run[4] then
        rcall('ZREM', base .. 'dagwait', rid)
      end
      events[n_events + 1], events[n_events + 2] = rid, claimed_event
      n_events = n_events + 2
      -- nine fields a run, by index: '#out' would look for the end of the list each time
      out[n_out + 1], out[n_out + 2], out[n_out + 3] = eid, rid, job_fields[1] or ''
      out[n_out + 4], out[n_out + 5], out[n_out + 6] = run[3] or '', '', token
      out[n_out + 7], out[n_out + 8], out[n_out + 9] = lease, now, run[5] or ''
      n_out = n_out + 9
    end
  end
  return #entries
end

-- Claim up to `count` runs of queue q (as stored, without a key). While runs with a
-- concurrency key wait on it (its ring, lib/queues.lua), the queue's own stream ('*' in
-- the ring) and each key's take turns, an equal share each, so one key's backlog delays
-- another's run by one turn at most; the next claim starts after the last one served,
-- and a stream found empty leaves the ring.
local function claim_queue(q, count)
  local ring = base .. 'kring:' .. q
  local n = rcall('LLEN', ring)
  if n == 0 then
    claim_from(ready_of(base, q), count)
    return
  end
  local set = base .. 'kset:' .. q
  if n == 1 and rcall('LINDEX', ring, 0) == '*' then  -- the keys' runs are all claimed
    rcall('DEL', ring, set)
    claim_from(ready_of(base, q), count)
    return
  end
  if rcall('SADD', set, '*') == 1 then
    rcall('RPUSH', ring, '*')
  end
  local members = rcall('LRANGE', ring, 0, count - 1)
  local name, band = string.match(q, '^([^%^]*)(.*)$')
  local goal = n_claimed + count
  local empty, last, progress, open = {}, 0, true, #members
  while progress and n_claimed < goal do
    progress = false
    -- each stream's turn takes an equal share of what is left (one run at least), so a
    -- big claim reads a few entries a stream, and a claim of one takes one from one
    local share = math.max(1, math.floor((goal - n_claimed) / open))
    for i, key in ipairs(members) do
      if n_claimed >= goal then
        break
      end
      if not empty[key] then
        local stream = ready_of(base, key == '*' and q or (name .. '@' .. key .. band))
        if claim_from(stream, math.min(share, goal - n_claimed)) > 0 then
          progress, last = true, i
        else
          empty[key], open = true, open - 1
        end
      end
    end
  end
  for _ = 1, last do
    local key = rcall('LPOP', ring)
    if not empty[key] then
      rcall('RPUSH', ring, key)
    end
  end
  for key in pairs(empty) do
    rcall('LREM', ring, 1, key)
    rcall('SREM', set, key)
  end
end

if #ARGV < 8 then
  claim_queue('', wanted)
else
  for i = 8, #ARGV, 2 do
    if n_claimed >= wanted then
      break
    end
    claim_queue(ARGV[i], math.min(tonumber(ARGV[i + 1]), wanted - n_claimed))
  end
end
flush_events(base, events)
if earliest then
  local at = tonumber(rcall('GET', reclaim_at_key) or '')
  if not at or earliest < at then
    rcall('SET', reclaim_at_key, earliest)
    rcall('PUBLISH', ARGV[5], 'r' .. ARGV[6] .. ':' .. earliest)
  end
end
return out
