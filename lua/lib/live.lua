-- Whether a job (or DAG) is there to act on: its status, or the refusal every script
-- answers alike, {-1} no such job, {-2} deleted. Callers define rcall.
local function live_status(job_key)
  local status = rcall('HGET', job_key, 'status')
  if not status then
    return nil, {-1}
  end
  if status == 'deleted' then
    return nil, {-2}
  end
  return status, nil
end

-- Whether a DAG may be changed, from its hash's fields 'status', 'version' and 'kind'
-- (the first three of the caller's HMGET): nil, or the refusal {-1} no such DAG, {-2}
-- deleted, {-3} at another version than ``version`` (nil: any version will do).
local function dag_refusal(cur, version)
  if not cur[1] or cur[3] ~= 'dag' then
    return {-1}
  end
  if cur[1] == 'deleted' then
    return {-2}
  end
  if version and cur[2] ~= version then
    return {-3}
  end
  return nil
end
