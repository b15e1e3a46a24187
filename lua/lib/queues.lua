-- Queues (core/queues.py): a shard keeps one ready stream per queue, the default queue's
-- being 'ready'. A queue as scripts carry it is its name, '' (or nil) for the default.
-- Job hashes ('q') and run records ('q') hold it only when it is not the default.
-- A run with a concurrency key has a stream of its own key within its queue,
-- '<name>@<key><band>' (core/concurrency.py): the queue's claims take its keys in turn
-- (claim.lua). Each queue keeps the keys with runs on their streams in a ring,
-- base .. 'kring:<queue>' (LIST), and a set of the same, base .. 'kset:<queue>'.
-- Callers define rcall.
-- Keys it builds from the shard key base (each script's hash slot): kring:, kset:,
-- ready, ready:<queue>.
local function ready_of(base, q)
  if q and q ~= '' then
    return base .. 'ready:' .. q
  end
  return base .. 'ready'
end

-- The queues this call put runs on: the caller wakes a worker of each (store/ready.py).
local woken = nil  -- queue -> true, for queues other than the default
local woken_default = false
local default_stream = nil  -- base .. 'ready', built once a call

-- The queue a keyed stream '<name>@<key><band>' belongs to, and the key.
local function split_key(q)
  local name, key, band = string.match(q, '^([^@]*)@([^%^]*)(.*)$')
  return name .. band, key
end

-- Put run `rid` on queue q's stream ('' or nil: the default queue's, 'ready'); a keyed
-- one's key joins its queue's ring.
local function enqueue(base, rid, q)
  if q and q ~= '' then
    rcall('XADD', base .. 'ready:' .. q, '*', 'r', rid)
    if string.find(q, '@', 1, true) then
      local plain, key = split_key(q)
      if rcall('SADD', base .. 'kset:' .. plain, key) == 1 then
        rcall('RPUSH', base .. 'kring:' .. plain, key)
      end
      q = plain
    end
    if q == '' then
      woken_default = true
    else
      woken = woken or {}
      woken[q] = true
    end
  else
    default_stream = default_stream or (base .. 'ready')
    rcall('XADD', default_stream, '*', 'r', rid)
    woken_default = true
  end
end

-- What a reply says of the queues that got runs: '' when none but the default did (the
-- common case, nothing built), else their names comma-separated, 'default' among them
-- when the default queue got runs too.
local function woken_queues()
  if not woken then
    return ''
  end
  local names = {}
  for q in pairs(woken) do
    names[#names + 1] = q
  end
  if woken_default then
    names[#names + 1] = 'default'
  end
  return table.concat(names, ',')
end
