-- Backpressure (core/backlog.py): whether a job's runs are queued past its bound. Callers
-- define rcall. Keys it builds from the shard key base: runs:<job>, run:<id>.
local BACKLOG_QUEUED = {scheduled = true, waiting = true}
-- Whether a job's runs are queued past its bound (`count` of them not yet claimed, 0 no
-- such bound; or the oldest of them older than `age` ms, nil none): the newest queued
-- run, which a coalesced tick joins, or nil. Its newest runs are looked at, at most
-- 100: claims take a queue's runs oldest first, so the queued ones are the newest.
local function backlogged(base, job, count, age, now_n)
  local newest = rcall('ZREVRANGE', base .. 'runs:' .. job, 0, 99)
  local queued, first, oldest = 0, nil, nil
  for _, rid in ipairs(newest) do
    local info = rcall('HMGET', base .. 'run:' .. rid, 'st', 'c')
    if BACKLOG_QUEUED[info[1] or ''] then
      queued = queued + 1
      first = first or rid
      oldest = tonumber(info[2])
    elseif info[1] ~= 'retrying' and info[1] ~= 'buffered' then
      break  -- one claimed or ended: the older ones were taken before it
    end
  end
  if not first then
    return nil
  end
  if (count > 0 and queued >= count) or (age and oldest and now_n - oldest >= age) then
    return first
  end
  return nil
end

-- A backlog code as fire.lua's items carry it (':p<n>' or ':c<n>', then ':g<ms>'): the
-- count bound and the age bound (nil none), or nil for no policy.
local function backlog_bounds(code)
  local count, age, any = 0, nil, false
  for key, value in string.gmatch(code or '', ':(%a)(%d*)') do
    if key == 'p' or key == 'c' then
      count, any = tonumber(value), true
    elseif key == 'g' then
      age = tonumber(value)
    end
  end
  if not any then
    return nil
  end
  return count, age
end
