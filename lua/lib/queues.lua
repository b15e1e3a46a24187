-- Queues (core/queues.py): a shard keeps one ready stream per queue, the default queue's
-- being 'ready'. A queue as scripts carry it is its name, '' (or nil) for the default.
-- Job hashes ('q') and run records ('q') hold it only when it is not the default.
-- Callers define rcall.
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

-- Put run `rid` on queue q's stream ('' or nil: the default queue's, 'ready').
local function enqueue(base, rid, q)
  if q and q ~= '' then
    rcall('XADD', base .. 'ready:' .. q, '*', 'r', rid)
    woken = woken or {}
    woken[q] = true
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
