-- A delivery (an event, an upstream's end) to a job or DAG that cannot run it now: the
-- paused one's, or one whose runs are queued past its backlog bound. Held in order in
-- evheld:<id> (with the shard's evheldjobs SET naming it, for lua/release_held.lua), the
-- latest only under 'keep_latest', dropped under 'drop' or past `most`. Its key marks
-- 'held:<cause>' meanwhile, so a duplicate finds it. Callers define rcall. Keys it builds
-- from the shard key base: evheld:<id>, evheldjobs, idem:<id>:<key>.
-- Returns the script's reply: {code, held, superseded causes...} or {4, why}.
local function hold_delivery(base, id, cause, key, args, rule, most, ttl, code)
  if rule == 'drop' then
    return {4, 'paused'}
  end
  local held_key = base .. 'evheld:' .. id
  local out = {code, 0}
  if rule == 'keep_latest' then
    for _, entry in ipairs(rcall('LRANGE', held_key, 0, -1)) do
      local held_cause, held_of = string.match(entry, '^([^\n]*)\n([^\n]*)\n')
      rcall('DEL', base .. 'idem:' .. id .. ':' .. held_of)
      out[#out + 1] = held_cause
    end
    rcall('DEL', held_key)
  elseif rcall('LLEN', held_key) >= tonumber(most) then
    return {4, 'full'}
  end
  out[2] = rcall('RPUSH', held_key, cause .. '\n' .. key .. '\n' .. args)
  rcall('SADD', base .. 'evheldjobs', id)
  rcall('SET', base .. 'idem:' .. id .. ':' .. key, 'held:' .. cause, 'PX', ttl)
  return out
end
