-- Who did what: one entry per change in chg:<id> (STREAM; the entry id is the server's
-- time), written by the very script that makes the change, so a change and its record
-- are one atomic step. Fields: a action, by who (a token's name, the SDK's actor, or
-- 'scheduler' for what the system does by itself), v the version after it ('' none), x
-- a detail ('' none). Capped at about CHANGES_KEPT entries a job. Callers define rcall.
local CHANGES_KEPT = 10000
local function log_change(key, action, actor, version, detail)
  rcall('XADD', key, 'MAXLEN', '~', CHANGES_KEPT, '*', 'a', action, 'by', actor,
    'v', version or '', 'x', detail or '')
end
