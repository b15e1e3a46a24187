"""Redis ACL roles: the commands and key patterns each kind of process needs, no more.

Three roles, for ``ACL SETUSER <user> <rules…>`` (``shardsched acl`` prints them):

- ``node``: shard owners and the HTTP API (fire, reclaim, register, change jobs);
- ``worker``: claims, renews and completes runs, heartbeats;
- ``reader``: the SDK or a report reading jobs and runs, ``shardsched status`` and
  ``shardsched audit``: reads only.

Every role is limited to the deployment's keys (``~<ns>:*``) and channels (``&<ns>:*``);
within them the reader may only read, and the worker may write only what running runs
needs (:data:`WORKER_SHARD_KEYS`): never a token, the node registry, a shard's lease or
a job's definition (:data:`NODE_SHARD_KEYS`).
No role has any of FLUSHALL, FLUSHDB, CONFIG, KEYS, DEBUG, SHUTDOWN, MONITOR or ACL. Redis
checks a user's permissions on every command a Lua script runs as well, so a script
cannot step outside them either. A worker runs only the functions a node loaded (FCALL,
no FUNCTION LOAD, EVAL or EVALSHA), so it brings no code of its own into Redis; which of
ours it calls, ACLs cannot tell apart, within its commands and keys. The reader runs no script
at all (no EVAL, EVALSHA or FCALL): a read-only role cannot make Redis busy.
"""

from __future__ import annotations

#: Commands every role sends: the connection handshake, the server clock, (behind
#: Sentinel) the primary's word that it is the primary, and the durable mode's WAIT.
_BASE = ("ping", "time", "select", "role", "wait")
#: Loading and running our scripts, each a Redis Function (store/functions.py). Not the
#: reader's: a script can spin (a loop runs until the busy-reply threshold and past it,
#: and every other client then gets BUSY), so a role that only reads runs none.
_SCRIPTS = ("function|load", "fcall", "fcall_ro")
#: Ending a runaway read-only script or function (shard/runaway.py).
_KILL = ("script|kill", "function|kill")
#: Running the functions a node loaded (after a FUNCTION FLUSH, a worker's call is
#: refused until a node meets the same and loads them: waited out).
_RUN_LOADED = ("fcall", "fcall_ro")
#: Reads, by Python and inside scripts.
_READS = (
    "exists", "get", "strlen", "pttl", "hget", "hmget", "hgetall", "hlen", "hexists",
    "zrange", "zrevrange", "zscore", "zcard", "zcount", "lrange", "llen", "lindex", "smembers",
    "scard", "sismember", "smismember", "getrange",
    "xrange", "xrevrange", "xlen", "xpending", "xinfo|groups", "xinfo|stream",
)  # fmt: skip
#: Writes, inside scripts and out (wake tokens: RPUSH, LTRIM, BLPOP), plus the pub/sub the
#: owners wait on.
_WRITES = (
    "set", "append", "del", "incr", "decr", "pexpire",
    "hset", "hsetnx", "hdel", "hincrby",
    "zadd", "zrem", "zremrangebyscore", "zpopmin", "rpush", "lpush", "lpop", "lrem", "ltrim",
    "blpop", "sadd", "srem",
    "xadd", "xack", "xdel", "xclaim", "xreadgroup", "xgroup|create",
    "publish", "subscribe", "unsubscribe",
)  # fmt: skip
#: A Redis Cluster's slot map (the cluster client asks for it).
_CLUSTER = ("cluster|slots", "cluster|shards", "cluster|info", "asking")

ROLES: dict[str, tuple[str, ...]] = {
    # SCRIPT KILL, FUNCTION KILL: a node that finds Redis BUSY with a runaway read-only
    # script or function ends it before its leases lapse (shard/runaway.py).
    # XTRIM: retention trims the event stream (lua/expire_history.lua).
    "node": (*_BASE, *_SCRIPTS, *_KILL, "xtrim", *_READS, *_WRITES, *_CLUSTER),
    # FCALL alone: the functions a node loaded, never code of its own (no FUNCTION LOAD,
    # no EVAL): a script that writes a key and then loops leaves Redis unkillable until
    # SHUTDOWN NOSAVE, so no role but the node's may run code it brought itself.
    "worker": (*_BASE, *_RUN_LOADED, *_READS, *_WRITES, *_CLUSTER),
    "reader": (*_BASE, *_READS, *_CLUSTER),
}
#: What no role may run, said explicitly (after the allow list, so it wins).
DENIED = ("flushall", "flushdb", "config", "keys", "debug", "shutdown", "monitor", "acl")


#: The keys of a shard a worker writes (a family ending in ':' is one key per id): its
#: claims, renewals, completions, output and hand-backs, and what a completion does (a
#: retry, a dead letter, a DAG release, the next backfill tick, a job's counters, a job
#: handed to the owner for its auto-pause, a success re-arming its dead-man's switch).
WORKER_SHARD_KEYS = (
    "ready", "ready:", "retries", "deadletter", "failures", "dagwait", "dagrun:", "dagvn:",
    "dagvgc:", "dagq:", "stats", "run:", "runs:", "reclaim_at", "bfq:", "events", "out:",
    "cnt:", "autopause", "waiting", "kring:", "kset:", "deadman", "buf:", "outq",
)  # fmt: skip
#: The keys of a shard only a node writes: the shard's ``owner`` lease and fencing
#: ``epoch``; what a run executes (a DAG's kept versions, a DAG run's version and args,
#: a run by hand's args); what a job is (its hash, timer entry, schedule segments,
#: versions, change and action logs, the job and DAG indexes and the index of names,
#: resumes and skip records), so a worker's password cannot change, add, resume or
#: re-time a job, choose what a run executes, nor rewrite its history.
NODE_SHARD_KEYS = (
    "owner", "epoch", "timer", "jobs", "dags", "job:", "segs:", "vers:", "resumes",
    "skips:", "chg:", "acts:", "idem:", "queues", "names:", "named:", "nclaim:",
    "names_indexed", "evfollow", "failing", "deadlines", "bfpace", "appfence:",
    # events received and their deliveries held (store/event_delivery.py)
    "evt:", "evpending", "evlog", "evheld:", "evheldjobs",
    # what a run executes: a DAG's kept versions, a DAG run's version and args, a run by
    # hand's args (a claim reads them; a worker that could write them could choose them)
    "dagv:", "dagrunv:", "args:",
)  # fmt: skip
#: The global keys a worker writes: its registry entry and the wake tokens. Not the API
#: tokens or their log, the node registry, the deployment's meta or dev's children.
WORKER_GLOBAL_KEYS = ("workers", "workerinfo", "ready", "ready:*", "ckwait")
#: The keys of a concurrency key (store/keys.py ConcurrencyKeys) a worker writes: its
#: holds, the waiting runs and the starts; not the key's limits or their change log.
WORKER_CK_KEYS = ("h", "r", "w", "s", "st")
NODE_CK_KEYS = ("lim", "chg")


def key_rules(role: str, namespace: str) -> list[str]:
    """Which keys ``role`` may read and write: the ``node`` all of the deployment's; the
    ``reader`` all, read only; the ``worker`` all read, and written only those above, so
    its password cannot mint or change a token, register a node, take a shard's lease or
    change a job (Redis checks this inside scripts too)."""
    if role == "node":
        return [f"~{namespace}:*"]
    if role == "reader":
        return [f"%R~{namespace}:*"]
    # a shard's tag is its number: one glob per width (1 to 5 digits: up to 16,384
    # shards), never ``{*}``, whose ``*`` runs across ``}`` and ``:`` and so would match
    # a node's key that holds user text (``…:idem:<job>:x}:run:y``)
    tags = ["{" + "[0-9]" * width + "}" for width in range(1, 6)]
    shard = [
        f"%RW~{namespace}:{tag}:{k}{'*' if k.endswith(':') else ''}"
        for k in WORKER_SHARD_KEYS
        for tag in tags
    ]
    shared = [f"%RW~{namespace}:{{g}}:{k}" for k in WORKER_GLOBAL_KEYS]
    ck = [f"%RW~{namespace}:{{ck:*}}:{k}" for k in WORKER_CK_KEYS]
    return [f"%R~{namespace}:*", *shard, *shared, *ck]


def acl_rules(role: str, namespace: str) -> list[str]:
    """The ``ACL SETUSER`` rules of ``role`` for the deployment ``namespace`` (without
    ``on`` and a password, which the operator adds)."""
    commands = ROLES[role]
    return [
        "resetkeys",
        *key_rules(role, namespace),
        "resetchannels",
        f"&{namespace}:*",
        "-@all",
        *(f"+{c}" for c in commands),
        *(f"-{c}" for c in DENIED),
    ]
