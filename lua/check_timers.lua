#!lua
--[[
  Liveness: the shard owner looks at a slice of its shard's jobs for an active job with
  no timer entry and no recorded reason why not ('nf' on the job: its schedule is
  exhausted). Such a job would silently never fire again; the owner re-plans it
  (repair_timers.lua). Read-only; fenced so only the owner's reading counts.

  KEYS[1] jobs    ZSET job_id -> creation (ms): the shard's jobs, walked by rank
  KEYS[2] timer   ZSET job_id -> next fire (ms)
  KEYS[3] epoch   STRING the shard's fencing token
  ARGV[1] epoch the caller holds
  ARGV[2] shard key base; job:<id> is built from it (same hash slot)
  ARGV[3] rank to start at
  ARGV[4] how many jobs to look at, at most

  Keys built from the shard key base (each in KEYS' hash slot): job:<id>, runs:<id>,
    skips:<id>.

  Returns {1, next_rank, job1, timing1, last_run1, last_skip1, first1, ...}: next_rank 0
  when the walk reached the end (start again from the first); each job found lost, with
  its timing JSON and what its ledger knows last (its newest run's tick, its newest skip
  record, '' for none) and its first timer score. {-1} when the caller's epoch is stale.
]]
local rcall = redis.call
local jobs_key, timer_key, epoch_key = KEYS[1], KEYS[2], KEYS[3]
local base = ARGV[2]
if rcall('GET', epoch_key) ~= ARGV[1] then
  return {-1}
end
local start, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local jobs = rcall('ZRANGE', jobs_key, start, start + count - 1)
local out = {1, #jobs < count and 0 or start + #jobs}
for _, job in ipairs(jobs) do
  local f = rcall('HMGET', base .. 'job:' .. job, 'status', 'dag', 'nf', 'timing', 'first')
  if f[1] == 'active' and not f[2] and not f[3] and f[4]
      and not rcall('ZSCORE', timer_key, job) then
    local run = rcall('ZRANGE', base .. 'runs:' .. job, -1, -1, 'WITHSCORES')
    local skip = rcall('ZRANGE', base .. 'skips:' .. job, -1, -1)
    out[#out + 1] = job
    out[#out + 1] = f[4]
    out[#out + 1] = run[2] or ''
    out[#out + 1] = skip[1] or ''
    out[#out + 1] = f[5] or ''
  end
end
return out
