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
