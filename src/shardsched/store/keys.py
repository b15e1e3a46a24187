"""Every Redis key name, and the id → shard mapping (the ids' grammar: core/ids.py).

All keys of shard k carry the hash tag ``{k}`` so one Lua call touches one hash slot (Redis
Cluster safe). Keys a script builds itself start with the shard's :attr:`ShardKeys.base`,
which carries the same tag. Global keys are tagged ``{g}`` (:mod:`.global_keys`). No other
module formats a key.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from functools import lru_cache

from shardsched.core.ids import dag_run_of as dag_run_of
from shardsched.core.ids import is_dag_id as is_dag_id
from shardsched.core.ids import job_of_run as job_of_run
from shardsched.core.ids import new_dag_id as new_dag_id
from shardsched.core.ids import new_job_id as new_job_id
from shardsched.core.ids import new_job_ids as new_job_ids
from shardsched.core.ids import run_id as run_id
from shardsched.core.ids import shard_key as shard_key
from shardsched.core.ids import task_job_id as task_job_id
from shardsched.store.ck_keys import ConcurrencyKeys as ConcurrencyKeys
from shardsched.store.global_keys import GlobalKeys as GlobalKeys
from shardsched.store.watch_keys import WatchKeys

DEFAULT_NAMESPACE = "ss"
DEFAULT_SHARDS = 64
CONSUMER_GROUP = "workers"


def shard_of(any_id: str, n_shards: int) -> int:
    return zlib.crc32(shard_key(any_id).encode()) % n_shards


def names_bucket(name: str) -> str:
    """Which of a shard's 256 buckets of names holds ``name``: the first two hex digits of
    its SHA-1 (lua/lib/names.lua computes the same)."""
    return hashlib.sha1(name.encode()).hexdigest()[:2]


def sweeper_shard(concurrency_key: str, n_shards: int) -> int:
    """The shard whose owner sweeps a concurrency key (its whole name hashed)."""
    return zlib.crc32(concurrency_key.encode()) % n_shards


@dataclass(frozen=True, slots=True)
class ShardKeys:
    """The keys of one shard."""

    namespace: str
    shard: int

    @property
    def base(self) -> str:
        """Prefix of every key of this shard; Lua scripts append ``job:<id>``, ``run:<id>``…"""
        return f"{self.namespace}:{{{self.shard}}}:"

    @property
    def timer(self) -> str:
        """ZSET job_id → next fire (ms): the durable record of what should fire."""
        return self.base + "timer"

    @property
    def ready(self) -> str:
        """STREAM of fired runs of the default queue, consumed by the ``workers`` group; a
        pending entry is a lease."""
        return self.base + "ready"

    def ready_of(self, queue: str) -> str:
        """STREAM of fired runs of ``queue`` (as stored: '' is the default queue's,
        :attr:`ready`; core/queues.py, lua/lib/queues.lua)."""
        return self.base + "ready:" + queue if queue else self.base + "ready"

    @property
    def queues(self) -> str:
        """SET of the queues other than the default that the shard's jobs ever named: the
        streams reclaim and the wake-up check look at besides :attr:`ready`."""
        return self.base + "queues"

    def key_ring(self, queue: str) -> str:
        """LIST the concurrency keys with runs on their streams within ``queue`` (as
        stored), and '*' for the queue's own stream: whose turn a claim takes next
        (lua/claim.lua, lib/queues.lua)."""
        return self.base + "kring:" + queue

    def key_set(self, queue: str) -> str:
        """SET the members of :meth:`key_ring`."""
        return self.base + "kset:" + queue

    @property
    def waiting(self) -> str:
        """ZSET run_id -> since (ms): runs waiting on a concurrency key's turn."""
        return self.base + "waiting"

    @property
    def retries(self) -> str:
        """ZSET run_id -> due (ms): retry attempts waiting out their backoff."""
        return self.base + "retries"

    @property
    def dead_letter(self) -> str:
        """ZSET run_id -> when (ms): runs that exhausted their attempts."""
        return self.base + "deadletter"

    @property
    def failures(self) -> str:
        """ZSET run_id -> when it ended (ms): runs that ended failed or dead_letter, the
        failure inbox (``GET /api/v1/runs?state=failed``); left with the run's history."""
        return self.base + "failures"

    @property
    def dags(self) -> str:
        """ZSET dag_id → creation (ms): every DAG of the shard, deleted ones included."""
        return self.base + "dags"

    @property
    def watch(self) -> WatchKeys:  # the owner's watches: deadlines, dead-man's switches
        return WatchKeys(self.base)

    @property
    def dag_wait(self) -> str:
        """ZSET run_id → stall deadline (ms): DAG task runs released and not yet claimed."""
        return self.base + "dagwait"

    def dag_run(self, dag_run_id: str) -> str:
        """HASH one DAG run: state, times, per task its state ``t:<task>`` and latest run
        id ``r:<task>`` (a DAG's own hash is ``job:<dag_id>``, its runs ``runs:<id>``)."""
        return self.base + "dagrun:" + dag_run_id

    def dag_version(self, dag_id: str, topology_version: int) -> str:
        """HASH an earlier topology of a DAG that open DAG runs still use: its 'roots',
        'tasks', per task 'd:', 'w:', 'g:', 's:' (spec JSON), 'l:' (lease) (see
        lua/lib/dag.lua). A node's alone: it says what a task runs. Deleted by a node
        once listed in :meth:`dag_versions_done`."""
        return self.base + "dagv:" + f"{dag_id}:{topology_version}"

    def dag_version_open(self, dag_id: str, topology_version: int) -> str:
        """STRING how many open DAG runs still use that earlier topology (a worker's
        completion counts one down: lua/lib/dag.lua)."""
        return self.base + "dagvn:" + f"{dag_id}:{topology_version}"

    def dag_versions_done(self, dag_id: str) -> str:
        """SET the earlier topologies no DAG run uses any more, for a node to delete."""
        return self.base + "dagvgc:" + dag_id

    def dag_run_given(self, dag_run_id: str) -> str:
        """HASH what a DAG run was opened with: 'tv' its topology's version, 'args' its
        args. A node's and the API's alone (the DAG run's own hash is a worker's too):
        what a task's run executes is read from here."""
        return self.base + "dagrunv:" + dag_run_id

    def run_args(self, job_id: str, tick: str) -> str:
        """STRING the args a run by hand was triggered with ('': the job's own), one for
        its tick's every attempt. The API's alone: a claim reads the args from here."""
        return self.base + "args:" + f"{job_id}:{tick}"

    def dag_queue(self, dag_id: str) -> str:
        """ZSET dag_run_id → order: DAG runs waiting for a slot under max_active_runs."""
        return self.base + "dagq:" + dag_id

    @property
    def jobs(self) -> str:
        """ZSET job_id → creation (ms): every job of the shard, deleted ones included."""
        return self.base + "jobs"

    @property
    def owner(self) -> str:
        """STRING node id with a PX expiry: the shard owner's lease."""
        return self.base + "owner"

    @property
    def epoch(self) -> str:
        """STRING integer, incremented by every acquisition: the fencing token."""
        return self.base + "epoch"

    def app_fence(self, app: str) -> str:
        """STRING the newest generation of a deploy of ``app`` announced on this shard:
        only writes fenced with it land here (lua/announce_deploy.lua, lua/lib/fence.lua)."""
        return self.base + "appfence:" + app

    @property
    def stats(self) -> str:
        """HASH counters of the shard (refused stale writes, …)."""
        return self.base + "stats"

    def names(self, name: str) -> str:
        """HASH name -> job id ('*' when several jobs of the shard share it): the bucket
        (of 256, by the name's SHA-1) of the shard's index of its jobs' names
        (lua/lib/names.lua)."""
        return self.base + "names:" + names_bucket(name)

    def named(self, name: str) -> str:
        """SET the ids of the shard's jobs named ``name``, when there are several."""
        return self.base + "named:" + name

    def name_claim(self, name: str) -> str:
        """STRING (short-lived) a creation asking for a unique ``name`` holds it, in the
        shard ``name`` hashes to, while it looks and registers (ops/jobs/names.py)."""
        return self.base + "nclaim:" + name

    @property
    def follow_cursor(self) -> str:
        """STRING the last event its owner's follower read (lua/follow_events.lua)."""
        return self.base + "evfollow"

    @property
    def failing(self) -> str:
        """SET jobs with a failure noted: their next success is a recovery."""
        return self.base + "failing"

    @property
    def names_indexed(self) -> str:
        """STRING the shard's jobs made before the index of names are in it (the owner's
        index_names.lua; absent: not yet, or where it has got to)."""
        return self.base + "names_indexed"

    def job(self, job_id: str) -> str:
        """HASH the job: spec JSON, timing JSON, status, times, version. Written by the
        owner and the API only (a worker's Redis role may not)."""
        return self.base + "job:" + job_id

    def counters(self, job_id: str) -> str:
        """HASH what completions count of a job or DAG: 'nact', 'ntv', 'bfa', 'ob'; each
        value adds to the job hash's field of the same name (lua/lib/counters.lua)."""
        return self.base + "cnt:" + job_id

    @property
    def autopause(self) -> str:
        """ZSET job_id -> ms: jobs a run of which failed for good, for the owner to decide
        their auto-pause (lua/lib/autopause.lua)."""
        return self.base + "autopause"

    def run(self, rid: str) -> str:
        """HASH one run record."""
        return self.base + "run:" + rid

    def runs_of(self, job_id: str) -> str:
        """ZSET run_id → scheduled_for (ms): a job's run history."""
        return self.base + "runs:" + job_id

    def segments(self, job_id: str) -> str:
        """LIST a job's schedule segments ("o|<first>|<timing>", "c|<score>|<at>"): what the audit
        expects of it."""
        return self.base + "segs:" + job_id

    def versions(self, job_id: str) -> str:
        """HASH version -> "status|from_ms|spec JSON": a job's earlier definitions."""
        return self.base + "vers:" + job_id

    @property
    def resumes(self) -> str:
        """ZSET job_id -> paused_until (ms): paused jobs the owner resumes by themselves."""
        return self.base + "resumes"

    def skips(self, job_id: str) -> str:
        """ZSET "first:last:count:reason:decided_at" -> first: ticks a policy skipped."""
        return self.base + "skips:" + job_id

    @property
    def reclaim_at(self) -> str:
        """STRING ms: when the owner next looks for lapsed leases (the earliest lease deadline
        it knows of; claim.lua lowers it, reclaim.lua sets it)."""
        return self.base + "reclaim_at"

    def backfill_queue(self, job_id: str) -> str:
        """ZSET tick -> tick: a job's backfill ticks waiting for a slot (lua/backfill.lua)."""
        return self.base + "bfq:" + job_id

    @property
    def backfill_pace(self) -> str:
        """ZSET job_id -> when its paced backfill's next release is due (ms):
        lua/backfill.lua adds, the owner's pacer lua/release_paced.lua works through it."""
        return self.base + "bfpace"

    @property
    def events(self) -> str:
        """STREAM (capped) every state change of a run of the shard (lua/lib/events.lua)."""
        return self.base + "events"

    def changes(self, any_id: str) -> str:
        """STREAM who changed a job or DAG, how and when (lua/lib/changes.lua)."""
        return self.base + "chg:" + any_id

    def acts(self, any_id: str) -> str:
        """STREAM who ran a job or DAG by hand (trigger, backfill, retry) and when: apart
        from its change log, so a flood of triggers cannot push a change out of it."""
        return self.base + "acts:" + any_id

    def output(self, rid: str) -> str:
        """STRING the tail of what a run printed (its worker's --output-tail)."""
        return self.base + "out:" + rid

    def event(self, event_id: str) -> str:
        """HASH an event received (core/events.py): its name, source, key, payload,
        when, and once settled its outcome 'o' (lua/store_event.lua, settle_event.lua)."""
        return self.base + "evt:" + event_id

    @property
    def events_pending(self) -> str:
        """ZSET event_id -> received (ms): the shard's events stored with no outcome yet;
        its owner delivers one left there (store/event_delivery.py)."""
        return self.base + "evpending"

    @property
    def event_log(self) -> str:
        """ZSET event_id -> received (ms): the shard's events, newest last (listing)."""
        return self.base + "evlog"

    @property
    def outcomes(self) -> str:
        """LIST "run id\\nstate\\nms": firings ended whose job (or DAG) has jobs that run
        after it (lua/lib/outcomes.lua); its owner dispatches and trims them
        (shard/event_chores.py, lua/trim_outcomes.lua)."""
        return self.base + "outq"

    def events_held(self, job_id: str) -> str:
        """LIST deliveries held while the job is paused (lua/deliver_event.lua)."""
        return self.base + "evheld:" + job_id

    @property
    def events_held_jobs(self) -> str:
        """SET the shard's jobs holding deliveries (lua/release_held.lua)."""
        return self.base + "evheldjobs"

    def idempotency(self, job_id: str, key: str) -> str:
        """STRING the run a trigger with idempotency ``key`` made (expires: trigger.lua)."""
        return self.base + "idem:" + job_id + ":" + key


@lru_cache(maxsize=4096)
def shard_keys(namespace: str, shard: int) -> ShardKeys:
    return ShardKeys(namespace, shard)


def owner_id(any_id: str) -> str:
    """The job or DAG whose name governs an id: a run's job, a task's (or DAG run's) DAG."""
    job = job_of_run(any_id)
    head, dot, _task = job.partition(".")
    return head if dot and is_dag_id(head) else job
