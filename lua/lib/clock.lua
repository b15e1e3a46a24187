-- The Redis server's clock, the one clock (ARCHITECTURE.md): milliseconds since the epoch, as
-- the decimal string the scripts store and compare (tonumber where arithmetic needs it).
-- Callers define rcall.
local function server_now_ms()
  local t = rcall('TIME')
  return t[1] .. string.format('%03d', math.floor(t[2] / 1000))
end
