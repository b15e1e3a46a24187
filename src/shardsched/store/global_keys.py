"""The deployment's own keys, all in the ``{g}`` hash slot: its facts, the live nodes and
workers, tokens and their log, the wake channel and ready tokens, the concurrency keys
under limits, and the families of notifications and calendars. A shard's keys are
:class:`~shardsched.store.keys.ShardKeys`."""

from __future__ import annotations

from dataclasses import dataclass

from shardsched.store.calendar_keys import CalendarKeys
from shardsched.store.notify_keys import NotifyKeys


@dataclass(frozen=True, slots=True)
class GlobalKeys:
    namespace: str

    @property
    def meta(self) -> str:
        """HASH deployment facts: the shard count fixed at first start."""
        return f"{self.namespace}:{{g}}:meta"

    @property
    def nodes(self) -> str:
        """ZSET node_id -> heartbeat expiry (ms, server clock): the live nodes."""
        return f"{self.namespace}:{{g}}:nodes"

    @property
    def node_info(self) -> str:
        """HASH node_id -> JSON (http address, start time): what /api/v1/cluster shows."""
        return f"{self.namespace}:{{g}}:nodeinfo"

    @property
    def workers(self) -> str:
        """ZSET worker_id -> heartbeat expiry (ms, server clock): the live workers."""
        return f"{self.namespace}:{{g}}:workers"

    def app_generation(self, app: str) -> str:
        """STRING counter: each deploy of ``app`` claims the next generation here (INCR);
        the later claim is the newer deploy (ops/apps/deploy.py)."""
        return f"{self.namespace}:{{g}}:appgen:{app}"

    @property
    def hooks(self) -> str:
        """HASH hook name -> its definition JSON, secrets included (core/events.HookSpec):
        never answered as is (ops/events/hooks.py)."""
        return f"{self.namespace}:{{g}}:hooks"

    def listeners(self, event: str) -> str:
        """SET the jobs that may listen to ``event``: written before a job's definition
        and trimmed after, so it holds every job that listens (and maybe some that no
        longer do: a delivery reads each one's definition first)."""
        return f"{self.namespace}:{{g}}:listen:{event}"

    @property
    def queue_backlogs(self) -> str:
        """HASH queue -> BacklogPolicy JSON: a queue's default backpressure, for its jobs
        with none of their own (ops/deployment/queues.py; nodes read it every second)."""
        return f"{self.namespace}:{{g}}:qbacklog"

    @property
    def selectors(self) -> str:
        """SET the selectors (``labels:k=v…``) some job runs after: a job written is
        looked at against each (ops/triggers.py)."""
        return f"{self.namespace}:{{g}}:selectors"

    @property
    def after_lock(self) -> str:
        """STRING held while a definition with ``after`` rules is checked and written
        (ops/triggers.py): two at once could close a cycle neither sees."""
        return f"{self.namespace}:{{g}}:afterlock"

    def after(self, upstream: str) -> str:
        """SET the jobs that may run after ``upstream``'s outcomes (ops/jobs/after.py):
        written before such a job (a superset, read with each one's definition)."""
        return f"{self.namespace}:{{g}}:after:{upstream}"

    @property
    def lag_history(self) -> str:
        """STREAM each node's trigger lag p50/p99 over the last minute, sampled every
        LAG_SAMPLE_S, kept a day (MINID): the console's lag chart
        (ops/deployment/lag_history.py)."""
        return f"{self.namespace}:{{g}}:lag"

    @property
    def worker_info(self) -> str:
        """HASH worker_id -> JSON (capacity, free slots, running, started)."""
        return f"{self.namespace}:{{g}}:workerinfo"

    @property
    def tokenlog(self) -> str:
        """STREAM (capped) who made or revoked which API token, when (lua/lib/tokenlog.lua)."""
        return f"{self.namespace}:{{g}}:tokenlog"

    @property
    def supervised(self) -> str:
        """HASH child name → records.Supervised JSON: what ``shardsched dev`` keeps alive."""
        return f"{self.namespace}:{{g}}:supervised"

    @property
    def tokens(self) -> str:
        """HASH h:<sha256 of a token> -> JSON record, n:<token name> -> sha256."""
        return f"{self.namespace}:{{g}}:tokens"

    @property
    def durable_channel(self) -> str:
        """Pub/sub channel nobody listens to: the durable mode PUBLISHes to it before each
        WAIT, so the WAIT counts every write the primary made before (store/redis)."""
        return f"{self.namespace}:durable"

    @property
    def wake_channel(self) -> str:
        """Pub/sub channel: a shard's timer changed (payload: shard number)."""
        return f"{self.namespace}:wake"

    @property
    def ready_tokens(self) -> str:
        """LIST of shard numbers, one per "this shard's ready stream may have runs": an idle
        worker pops one (BLPOP, store/ready.py). Another queue's: :meth:`ready_tokens_of`."""
        return f"{self.namespace}:{{g}}:ready"

    @property
    def limited_keys(self) -> str:
        """SET the concurrency keys with limits of their own (``GET /api/v1/concurrency``)."""
        return f"{self.namespace}:{{g}}:cklimits"

    @property
    def waiting_keys(self) -> str:
        """SET concurrency keys runs may wait on: the owners' sweep looks at each
        (shard/limits.py); a worker adds one before it parks a run on it."""
        return f"{self.namespace}:{{g}}:ckwait"

    @property
    def notify(self) -> NotifyKeys:  # store/notify_keys.py
        return NotifyKeys(f"{self.namespace}:{{g}}:")

    @property
    def calendars(self) -> CalendarKeys:  # store/calendar_keys.py
        return CalendarKeys(f"{self.namespace}:{{g}}:")

    def ready_tokens_of(self, queue: str) -> str:
        """The wake-token LIST of ``queue`` (as stored, '' the default's)."""
        return f"{self.namespace}:{{g}}:ready:{queue}" if queue else self.ready_tokens
