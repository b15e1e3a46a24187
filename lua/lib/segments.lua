-- The first schedule segment lives in the job hash ('first' and 'timing') until the job
-- first changes; then the segment log (LIST segs:<job>) is written out in full.
local function materialize_segments(job_key, segs_key)
  if redis.call('EXISTS', segs_key) == 0 then
    local first = redis.call('HMGET', job_key, 'first', 'timing')
    if first[1] and first[1] ~= '' then
      redis.call('RPUSH', segs_key, 'o|' .. first[1] .. '|' .. first[2])
    end
  end
end
