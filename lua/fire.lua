#!lua
--[[
  Fire a batch of due jobs, then report the next batch: the shard owner's hot path.

  For each item, if the job's timer entry still has score <old> (compare-and-set; a PATCH,
  pause or delete in between wins): create the run record <job>:<fire>:1 unless it exists
  (the create-if-absent is the dedupe) and append it to the ready stream; store the skip
  record if the catch-up policy skipped ticks; move the timer entry to <new> or remove it.
  An item that fires or skips and removes the entry (its schedule is exhausted) marks its
  job 'nf' = 'exhausted': why an active job has no timer entry (check_timers.lua).
  A DAG's timer entry (id dag_...) opens the DAG run <dag>:<fire> instead, releasing its
  root tasks or queueing it under max_active_runs (lib/dag.lua).

  KEYS[1] timer   ZSET job_id -> next fire (ms)
  KEYS[2] ready   STREAM of fired runs
  KEYS[3] epoch   STRING the shard's fencing token
  KEYS[4] stats   HASH shard counters: fired (runs created), refused_fire (stale calls)
  KEYS[5] retries ZSET run_id -> when a retry attempt is due: due ones are delivered too
  KEYS[6] autopause ZSET job_id -> when a run of it failed for good (complete.lua): each is
          auto-paused first if its failure streak reached its limit (lib/autopause.lua)
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base ("<ns>:{<shard>}:"); run:<id>, runs:<job>, skips:<job>, dagv:<dag>:<tv> (with dagvn:<dag>:<tv>, dagvgc:<dag>, dagrunv:<id>),
          cnt:<id>, segs:<id>, vers:<id> and job:<id> keys are built from it and share
          KEYS' hash slot
  ARGV[3] how many due entries to report back at most (0: none, only next_ms, which is
          then the earliest timer or retry score, due or not)
  ARGV[4] look-ahead (ms): due jobs are reported up to now + this, so the owner can plan
          them before their tick; an item is only fired once its tick is due
  ARGV[5] ticks of this batch the owner found missed (their time plus misfire grace had
          passed): added to the shard's 'missed' counter
  ARGV[6..] items of 8: job id, old score, tick to fire ('' none), new score ('' removes
          the entry), skip record ('' none, else "first:last:count:reason"), overlap
          policy (a allow | f forbid: skip the tick while the job's last run is active |
          r replace: cancel that run, fire this one | b buffer_one, B buffer_all: the tick
          waits in buf:<job> for that run to end, lib/buffer.lua; one, or up to 1,000,
          beyond which it is skipped 'overlap_buffer_full' | c cancel_other: cancel that
          run; one not started anywhere yet is replaced at once, one claimed or running
          has this tick wait in buf:<job> until its worker has stopped it (its lease ended:
          reclaim.lua), a later tick meanwhile skipped 'overlap_buffer_full'; followed by ':<n>' when the job
          stops after n fires: its count 'fc' grows with each run made, and at n its
          entry goes, its schedule segment closes (segs:<id>) and it is marked 'nf' =
          'max_fires'; ':s<ms>' and ':f<ms>' index each run it makes in the shard's
          deadlines ZSET, 's|<run>' ('sk|<run>' with ':k': skipped if late) at its planned
          time plus the start deadline, 'f|<run>' plus the finish deadline:
          lua/deadlines.lua; backpressure: ':p<n>' skips the tick (recorded 'backlog')
          while n of the job's runs are queued, ':c<n>' coalesces it instead (recorded
          'coalesced', its tick added to the newest queued run's 'co' (the first 1,000 or so;
          all counted in 'con')), n 0 for no count
          bound, ':g<ms>' also when the oldest queued one is that old), queue as stored ('' the default's
          normal band; as this script reported it with the job due), planned time of the
          tick ('' when it is the tick itself; else the tick plus the job's spread offset,
          core/jitter.py: kept on the run record as 'pl')

  A run goes to its job's queue's stream (lib/queues.lua): 'ready' for the default queue,
  ready:<queue> for another, whose name the run's record keeps ('q').

  Returns {1, now_ms, fired, retried, next_ms, queues, overlapped, job1, score1, timing1,
  job2, ...}:
    now_ms   the server's clock;
    fired    runs and DAG runs created by this call;
    retried  retry attempts due and moved to the ready stream (with fired: whether the
             caller should wake a worker for this shard, store/ready.py);
    next_ms  the earliest future timer or retry score ('' when both are empty or jobs are
             due; with ARGV[3] 0, the earliest score, due or not);
    queues   '' when every run made or retried here went to the default queue's stream,
             else the queues that got runs, comma-separated ('default' for 'ready'): the
             caller wakes a worker of each;
    overlapped  the ticks this call's overlap policy did not fire, 'job|reason' joined
             by ',' (reason overlap or overlap_buffer_full; '' none): the caller counts
             them by reason and label;
    then the due jobs (score <= now_ms + look-ahead), each with its timing JSON and its
    queue as stored ('' the default's normal band).
  Keys built from the shard key base (each in KEYS' hash slot): dagq:<id>, dagrun:<id>,
    dagwait, deadlines, events, job:<id>, run:<id>, runs:<id>, skips:<id>, buf:<id>. Every run made, skipped,
    cancelled or promoted from retrying is an event (lib/events.lua).

  Returns {-1, current_epoch} when the caller's epoch is stale (only the counter written).
  A concurrency key's runs have a stream of their own within their queue, and each queue
  a ring and a set of its keys with runs (kring:<queue>, kset:<queue>), all built from
  the shard key base (lib/queues.lua).
]]
local rcall = redis.call
-- @include runids
-- @include clock
-- @include events
-- @include queues
local timer_key, ready_key, epoch_key, stats_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local retries_key, autopause_key = KEYS[5], KEYS[6]
local base = ARGV[2]

-- @include skips
-- @include dag
-- @include segments
-- @include autopause
-- @include buffer
-- @include backlog


local current = rcall('GET', epoch_key)
if current ~= ARGV[1] then
  rcall('HINCRBY', stats_key, 'refused_fire', 1)
  return {-1, current or ''}
end

local now = server_now_ms()

-- Jobs a worker's completion handed over: paused now, before anything of theirs fires.
local suspects = rcall('ZRANGE', autopause_key, '0', '99')
if #suspects > 0 then
  rcall('ZREM', autopause_key, unpack(suspects))
  for _, job in ipairs(suspects) do
    auto_pause_check(base, job, now)
  end
end

local fired = 0
local overlapped = {}  -- "job|reason" of the ticks the overlap policy did not fire
local applied = 0

local events = {}
local ACTIVE = {scheduled = true, claimed = true, running = true, retrying = true,
  waiting = true}
local now_n = tonumber(now)
for i = 6, #ARGV, 8 do
  local job, old, fire, new, skip = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local overlap, max_fires, start_dl, finish_dl, skip_late = ARGV[i + 5], nil, nil, nil, ''
  local backlog, backlog_n, backlog_age = nil, 0, nil
  if #overlap > 1 then
    for key, value in string.gmatch(overlap, ':(%a)(%d*)') do
      if key == 'm' then
        max_fires = tonumber(value)
      elseif key == 's' then
        start_dl = tonumber(value)
      elseif key == 'f' then
        finish_dl = tonumber(value)
      elseif key == 'k' then
        skip_late = 'k'
      elseif key == 'p' or key == 'c' then
        backlog, backlog_n = key, tonumber(value)
      elseif key == 'g' then
        backlog_age = tonumber(value)
      end
    end
    overlap = string.sub(overlap, 1, 1)
  end
  local spent = false  -- its last allowed fire made now
  local score = rcall('ZSCORE', timer_key, job)
  -- compare-and-set on the timer; and never before the tick (planned ahead of it)
  if score and (score == old or tonumber(score) == tonumber(old)) and tonumber(old) <= now_n then
    applied = applied + 1
    if fire ~= '' and backlog then  -- backpressure: its runs still queued past its bound
      local absorber = backlogged(base, job, backlog_n, backlog_age, now_n)
      if absorber then
        if backlog == 'p' then
          record_skip(base, job, fire, fire, 1, 'backlog', now)
          overlapped[#overlapped + 1] = job .. '|backlog'
        else
          record_skip(base, job, fire, fire, 1, 'coalesced', now)
          overlapped[#overlapped + 1] = job .. '|coalesced'
          local run_key = base .. 'run:' .. absorber
          local had = rcall('HGET', run_key, 'co')
          if not had then
            rcall('HSET', run_key, 'co', fire)
          elseif #had < 14000 then  -- the first 1,000 or so it stands for, listed
            rcall('HSET', run_key, 'co', had .. ',' .. fire)
          end
          rcall('HINCRBY', run_key, 'con', 1)  -- and all of them counted
        end
        fire = ''
      end
    end
    if fire ~= '' and overlap ~= 'a' then
      local job_key = base .. 'job:' .. job
      local active = rcall('HGET', job_key, 'act')
      local active_key = active and (base .. 'run:' .. active)
      local active_state = active and rcall('HGET', active_key, 'st')
      if overlap == 'c' and rcall('EXISTS', base .. 'buf:' .. job) == 1 then
        -- a tick already waits for a cancelled run to stop: this one is one too many
        record_skip(base, job, fire, fire, 1, 'overlap_buffer_full', now)
        overlapped[#overlapped + 1] = job .. '|overlap_buffer_full'
        fire = ''
      elseif overlap == 'c' and active and ACTIVE[active_state or ''] then
        rcall('HSET', active_key, 'st', 'cancelled', 'f', now,
          'r', 'cancelled for the tick of ' .. fire .. ' (cancel_other)')
        add_event(events, active, active_state, 'cancelled', '', 'cancel_other')
        if active_state == 'claimed' or active_state == 'running' then
          buffer_push(base, job, fire, 1)  -- runs once its worker has stopped the other
          fire = ''
        end
      elseif active and ACTIVE[active_state or ''] then
        if overlap == 'f' then
          record_skip(base, job, fire, fire, 1, 'overlap', now)
          overlapped[#overlapped + 1] = job .. '|overlap'
          fire = ''
        elseif overlap == 'b' or overlap == 'B' then  -- waits for the active run to end
          if not buffer_push(base, job, fire, overlap == 'b' and 1 or 1000) then
            record_skip(base, job, fire, fire, 1, 'overlap_buffer_full', now)
            overlapped[#overlapped + 1] = job .. '|overlap_buffer_full'
          end
          fire = ''
        else
          rcall('HSET', active_key, 'st', 'cancelled', 'f', now,
            'r', 'replaced by the tick of ' .. fire)
          add_event(events, active, active_state, 'cancelled', '', 'replaced')
        end
      end
      if fire ~= '' then
        rcall('HSET', job_key, 'act', run_id(job, fire, '1'))
      end
    end
    if fire ~= '' and string.sub(job, 1, 4) == 'dag_' then
      local code = dag_open(base, ready_key, job, fire, fire, now, false)  -- counted in fired
      if code == 1 or code == 2 then
        fired = fired + 1
      end
    elseif fire ~= '' then
      local rid = run_id(job, fire, '1')
      local run_key = base .. 'run:' .. rid
      if rcall('EXISTS', run_key) == 0 then
        -- job, tick and attempt are in the run id; the record keeps only what is not
        local q = ARGV[i + 6]
        if q ~= '' then
          rcall('HSET', run_key, 'st', 'scheduled', 'c', now, 'q', q)
        else
          rcall('HSET', run_key, 'st', 'scheduled', 'c', now)
        end
        if ARGV[i + 7] ~= '' then
          rcall('HSET', run_key, 'pl', ARGV[i + 7])
        end
        rcall('ZADD', base .. 'runs:' .. job, fire, rid)
        enqueue(base, rid, q)
        events[#events + 1] = rid
        events[#events + 1] = '>scheduled||'  -- event_value('', 'scheduled', '', '')
        fired = fired + 1
        if max_fires and rcall('HINCRBY', base .. 'job:' .. job, 'fc', 1) >= max_fires then
          spent = true
        end
        if start_dl or finish_dl then  -- from the tick's planned time
          local planned = tonumber(ARGV[i + 7] ~= '' and ARGV[i + 7] or fire)
          if start_dl then
            rcall('ZADD', base .. 'deadlines', planned + start_dl, 's' .. skip_late .. '|' .. rid)
          end
          if finish_dl then
            rcall('ZADD', base .. 'deadlines', planned + finish_dl, 'f|' .. rid)
          end
        end
      end
    end
    if skip ~= '' then
      local first, last, count, reason = string.match(skip, '^([^:]+):([^:]+):([^:]+):(.+)$')
      record_skip(base, job, first, last, count, reason, now)
    end
    if spent then  -- its schedule ends at this tick: its segment closes after it
      local job_key, segs_key = base .. 'job:' .. job, base .. 'segs:' .. job
      rcall('ZREM', timer_key, job)
      rcall('HSET', job_key, 'nf', 'max_fires')
      materialize_segments(job_key, segs_key)
      local planned = ARGV[i + 7] ~= '' and ARGV[i + 7] or fire
      rcall('RPUSH', segs_key, 'c|' .. (tonumber(planned) + 1) .. '|' .. now)
    elseif new == '' then
      rcall('ZREM', timer_key, job)
      if fire ~= '' or skip ~= '' then  -- its schedule is exhausted: said on the job
        local job_key = base .. 'job:' .. job
        if rcall('EXISTS', job_key) == 1 then
          rcall('HSET', job_key, 'nf', 'exhausted')
        end
      end
    else
      rcall('ZADD', timer_key, new, job)
    end
  end
end
-- Retry attempts whose backoff is over join the stream (their records exist already).
local retried = 0
local retry_due = rcall('ZRANGE', retries_key, '-inf', now, 'BYSCORE', 'LIMIT', '0', '500')
for _, rid in ipairs(retry_due) do
  local run_key = base .. 'run:' .. rid
  local run = rcall('HMGET', run_key, 'st', 'q')
  if run[1] == 'retrying' then
    rcall('HSET', run_key, 'st', 'scheduled')
    enqueue(base, rid, run[2])
    add_event(events, rid, 'retrying', 'scheduled', '', '')
    retried = retried + 1
  end
  rcall('ZREM', retries_key, rid)
end
flush_events(base, events)
if fired > 0 then
  rcall('HINCRBY', stats_key, 'fired', string.format('%d', fired))
end
if ARGV[5] ~= '0' and applied > 0 then  -- a replay of an applied call applies nothing
  rcall('HINCRBY', stats_key, 'missed', ARGV[5])
end

local due = {}
if ARGV[3] ~= '0' then
  local horizon = string.format('%d', now_n + tonumber(ARGV[4]))
  due = rcall('ZRANGE', timer_key, '-inf', horizon, 'BYSCORE', 'LIMIT', '0', ARGV[3],
    'WITHSCORES')
end
local out = {1, now, fired, retried, '', woken_queues(), table.concat(overlapped, ',')}
if #due == 0 then
  local first = rcall('ZRANGE', timer_key, '0', '0', 'WITHSCORES')
  local retry = rcall('ZRANGE', retries_key, '0', '0', 'WITHSCORES')
  if #first > 0 and (#retry == 0 or tonumber(first[2]) <= tonumber(retry[2])) then
    out[5] = first[2]
  elseif #retry > 0 then
    out[5] = retry[2]
  end
  return out
end
for i = 1, #due, 2 do
  local info = rcall('HMGET', base .. 'job:' .. due[i], 'timing', 'q')
  out[#out + 1] = due[i]
  out[#out + 1] = due[i + 1]
  out[#out + 1] = info[1] or ''
  out[#out + 1] = info[2] or ''
end
return out
