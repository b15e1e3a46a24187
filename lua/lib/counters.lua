-- A job's (or DAG's) counters that completions change live in cnt:<id> (HASH), beside its
-- hash: 'nact' (DAG runs active), 'ntv' (DAG runs open on the current topology), 'bfa'
-- (backfill runs active), 'ob' (output bytes kept in Redis). The job's hash is written by
-- the owner and the API only (a worker's Redis role may not write it, store/acl.py).
-- A counter's value is the sum of both hashes' fields: a deployment from before, or a
-- worker of the previous version while an upgrade rolls, counts in the job's hash, and
-- every count is kept. Callers define rcall.
-- Keys it builds from the shard key base (each script's hash slot): cnt:, job:<id>.
local function counter(base, id, field)
  return tonumber(rcall('HGET', base .. 'cnt:' .. id, field) or '0')
    + tonumber(rcall('HGET', base .. 'job:' .. id, field) or '0')
end

-- Add `by` to a counter; returns its new value.
local function counter_add(base, id, field, by)
  local here = rcall('HINCRBY', base .. 'cnt:' .. id, field, by)
  return here + tonumber(rcall('HGET', base .. 'job:' .. id, field) or '0')
end

-- Whether a counter was ever written (an output kept before quotas were counted is not
-- given back).
local function counter_exists(base, id, field)
  return rcall('HEXISTS', base .. 'cnt:' .. id, field) == 1
    or rcall('HEXISTS', base .. 'job:' .. id, field) == 1
end
