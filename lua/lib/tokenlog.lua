-- Who made or revoked which token, and when: one entry per act in the global tokenlog
-- (STREAM; the entry id is the server's time), written by the script that does it.
-- Fields: a action (created, revoked), by who, n the token's name, x a detail (its
-- scopes and prefixes; how a revoke found it). Capped at about TOKEN_LOG_KEPT entries.
-- Callers define rcall.
local TOKEN_LOG_KEPT = 10000
local function log_token(key, action, actor, name, detail)
  rcall('XADD', key, 'MAXLEN', '~', TOKEN_LOG_KEPT, '*', 'a', action, 'by', actor,
    'n', name, 'x', detail or '')
end
