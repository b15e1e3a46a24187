-- The shard's index of its jobs' names (a job of its own, not a DAG's task), so that a
-- name can be a handle (GET /api/v1/jobs?name=): names:<bucket> (HASH name -> job id, or
-- '*' when several jobs of the shard share it; then named:<name> is the SET of their
-- ids). A name's bucket is the first two hex digits of its SHA-1 (store/keys.py computes
-- the same): 256 small hashes stay compact listpacks where one big one would cost a
-- hash table's ~100 bytes an entry. Kept by the scripts that create, rename and delete a
-- job (register_job, update_job, delete_job) and built once for jobs older than it
-- (index_names). Callers define rcall.
-- bucket: the name's bucket when the caller has it (register_job's from the client: a
-- SHA-1 here is ~6 % of a registration's instructions); nil: computed here
local function names_key(base, name, bucket)
  return base .. 'names:' .. (bucket or string.sub(redis.sha1hex(name), 1, 2))
end

local function name_add(base, name, job, bucket)
  if name == '' then
    return
  end
  local names = names_key(base, name, bucket)
  if rcall('HSETNX', names, name, job) == 1 then
    return  -- the common case: the first job of that name in the shard
  end
  local cur = rcall('HGET', names, name)
  if cur == '*' then
    rcall('SADD', base .. 'named:' .. name, job)
  elseif cur ~= job then
    rcall('SADD', base .. 'named:' .. name, cur, job)
    rcall('HSET', names, name, '*')
  end
end

local function name_remove(base, name, job)
  if name == '' then
    return
  end
  local names = names_key(base, name)
  local cur = rcall('HGET', names, name)
  if cur == job then
    rcall('HDEL', names, name)
  elseif cur == '*' then
    local set = base .. 'named:' .. name
    rcall('SREM', set, job)
    if rcall('SCARD', set) <= 1 then
      local left = rcall('SMEMBERS', set)
      rcall('DEL', set)
      if left[1] then
        rcall('HSET', names, name, left[1])
      else
        rcall('HDEL', names, name)
      end
    end
  end
end
