-- Callers define rcall.
-- A job's queue on its hash; a queue other than the default joins the shard's set of
-- queues (base .. 'queues'), the streams reclaim and the wake-up check look at.
local function set_job_queue(base, job_key, q, new)
  if q ~= '' then
    rcall('HSET', job_key, 'q', q)
    rcall('SADD', base .. 'queues', q)
  elseif not new then
    rcall('HDEL', job_key, 'q')
  end
  local band = not new and rcall('HGET', job_key, 'bfb')  -- a backfill's (lib/backfill)
  if band and string.gsub(q, '%^.*$', '') .. band ~= '' then
    rcall('SADD', base .. 'queues', string.gsub(q, '%^.*$', '') .. band)
  end
end
