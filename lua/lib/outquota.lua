-- Output kept in Redis is counted per job (its counter 'ob') and per shard (stats
-- 'ob', the deployment's share), and held under the caller's quotas: what would pass
-- either keeps only the tail that fits (none when nothing does), and the run says which
-- quota cut it ('oq': job | deployment). The bytes printed in all are still counted
-- ('ol'), so a run always says how much it printed. Callers define rcall and include
-- counters; expire_history
-- gives the bytes back when it removes an output.
-- @include counters
local function keep_output(base, job, out_key, data, append, job_quota, shard_quota)
  local old = rcall('STRLEN', out_key)
  local stats_key = base .. 'stats'
  local wanted = append and (old + #data) or #data
  local room, cut_by = wanted, nil
  if job_quota > 0 then
    local used = counter(base, job, 'ob')
    if used - old + wanted > job_quota then
      room, cut_by = math.max(0, job_quota - used + old), 'job'
    end
  end
  if shard_quota > 0 then
    local used = tonumber(rcall('HGET', stats_key, 'ob') or '0')
    if used - old + room > shard_quota then
      room, cut_by = math.max(0, shard_quota - used + old), 'deployment'
    end
  end
  if room >= wanted then
    rcall(append and 'APPEND' or 'SET', out_key, data)
  elseif room > 0 then
    local whole = append and ((rcall('GET', out_key) or '') .. data) or data
    rcall('SET', out_key, string.sub(whole, -room))
  else
    rcall('DEL', out_key)
  end
  local kept = math.min(room, wanted)
  if kept ~= old then
    counter_add(base, job, 'ob', kept - old)
    rcall('HINCRBY', stats_key, 'ob', kept - old)
  end
  return cut_by
end

-- Give back what a removed output counted (before it is deleted).
local function forget_output(base, job, out_key)
  local len = rcall('STRLEN', out_key)
  if len > 0 then
    if counter_exists(base, job, 'ob') then
      counter_add(base, job, 'ob', -len)
    end
    rcall('HINCRBY', base .. 'stats', 'ob', -len)
  end
end
