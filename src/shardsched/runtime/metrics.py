"""Prometheus metrics: what a node, a router and a worker export (the seed's section 15).

Each process owns one :class:`Metrics` with its own registry (several nodes and workers
may share a test process). Signals are counted where they are observed: trigger lag and
missed ticks by the shard actor that fires, lease reclaims and stalled DAG tasks by the
shard owner, claim latency, dead letters and overrunning runs by the worker. The cluster's
state (queue depths, epochs, workers alive, free slots) is read from Redis when scraped
(:func:`refresh_cluster`), so any node or router answers it alike: aggregate with max().

Label cardinality is bounded: job ids label only the seed's per-job series, and at most
``job_label_limit`` distinct ids per process (the rest are counted as ``_other``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from shardsched.core.errors import error_kind
from shardsched.runtime.metric_kinds import BatchHistogram, LabelLimiter, Window

#: Lag and latency buckets (seconds): the burst is judged in tenths of a second.
LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0, 30.0, 60.0)
WRITE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
DEFAULT_JOB_LABEL_LIMIT = 100


#: Distinct teams the per-team tick accounting keeps series for (then ``_other``).
TEAM_LABEL_LIMIT = 200


class Metrics:
    """Every series shardsched exports, in one registry per process."""

    def __init__(self, job_label_limit: int = DEFAULT_JOB_LABEL_LIMIT) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.job_label = LabelLimiter(job_label_limit)
        self.dag_label = LabelLimiter(job_label_limit)
        self.team_label = LabelLimiter(TEAM_LABEL_LIMIT)
        ns = "shardsched"
        # firing (node)
        self.trigger_lag = BatchHistogram(
            f"{ns}_trigger_lag_seconds",
            "Run record created minus its scheduled tick (the headline SLA)",
            LAG_BUCKETS,
            r,
        )
        self.lag_window = Window(60.0)
        self.ledger_write = Histogram(
            f"{ns}_scheduler_ledger_write_latency_seconds",
            "Round trip of one ledger-writing script call",
            ["script"],
            buckets=WRITE_BUCKETS,
            registry=r,
        )
        self.fired = Counter(f"{ns}_runs_fired", "Run records created by firing", registry=r)
        self.missed = Counter(
            f"{ns}_jobs_missed_schedule",
            "Ticks whose time plus misfire grace passed before they fired (found by the owner); "
            "critical: the job's label critical is true (unknown: it could not be read)",
            ["job_id", "critical"],
            registry=r,
        )
        self.ticks_skipped = Counter(
            f"{ns}_ticks_skipped",
            "Ticks their owner recorded skipped, by reason (misfire, catchup_latest,"
            " catchup_limit, window_closed, calendar, overlap, overlap_buffer_full, dst_*"
            " excepted): one series per reason, whatever the fleet's size (per job: GET"
            " /jobs/{id}/stats; per team: shardsched_schedule_ticks_total)",
            ["reason"],
            registry=r,
        )
        self.schedule_ticks = Counter(
            f"{ns}_schedule_ticks",
            "Ticks decided by their owner, by the jobs' team label (core/labels.ACCOUNT_LABEL;"
            " 'none' when unlabelled, at most 200 teams, then _other): outcome fired, late"
            " (fired past its misfire grace) or skipped with its reason",
            ["team", "outcome", "reason"],
            registry=r,
        )
        self.timer_repairs = Counter(
            f"{ns}_timer_repairs",
            "Active jobs found with no timer entry and no reason why, re-planned by their"
            " owner (a job that would otherwise never fire again: investigate)",
            registry=r,
        )
        self.deadlines_missed = Counter(
            f"{ns}_deadlines_missed",
            "Deadlines missed, by kind: start (a run not started by its start deadline),"
            " finish (not finished by its finish deadline), success (a job's dead-man's"
            " switch: no successful run within expect_success_within_s)",
            ["kind"],
            registry=r,
        )
        self.quarantined = Counter(
            f"{ns}_jobs_quarantined",
            "Jobs paused by their shard owner because they could not be planned",
            registry=r,
        )
        self.notifications = Counter(
            f"{ns}_notification_attempts",
            "Delivery attempts of notification messages, by outcome (delivered, retry, failed)",
            ["outcome"],
            registry=r,
        )
        self.ownership_changes = Counter(
            f"{ns}_shard_ownership_changes",
            "Shard leases this node acquired (each is a new epoch: the seed's leader_term)",
            ["shard"],
            registry=r,
        )
        self.refused = Counter(
            f"{ns}_refused_writes", "Writes refused because the epoch moved on", registry=r
        )
        self.lease_reclaims = Counter(
            f"{ns}_lease_reclaim",
            "Runs taken back from a worker whose lease lapsed",
            registry=r,
        )
        self.poisoned = Counter(
            f"{ns}_poison_runs", "Runs failed after their lease lapsed too often", registry=r
        )
        self.archived = Counter(
            f"{ns}_runs_archived",
            "Finished runs moved from Redis to the cold archive by retention",
            registry=r,
        )
        self.events_received = Counter(
            f"{ns}_events_received",
            "Events received (emitted or by a signed hook) by the outcome recorded: runs,"
            " held, deduplicated, dropped, refused",
            ["source", "outcome"],
            registry=r,
        )
        self.hook_refusals = Counter(
            f"{ns}_hook_requests_refused",
            "Hook requests refused before anything was written, by why",
            ["reason"],
            registry=r,
        )
        self.dag_stalled = Counter(
            f"{ns}_dag_stalled",
            "DAG task runs released and not claimed within their DAG's stall SLA",
            ["dag_id"],
            registry=r,
        )
        # cluster state (read from Redis at scrape time)
        self.epoch = Gauge(
            f"{ns}_shard_epoch", "Current fencing epoch per shard", ["shard"], registry=r
        )
        self.shard_owned = Gauge(
            f"{ns}_shard_owned", "1 when the shard is owned by a live node", ["shard"], registry=r
        )
        self.queue_ready = Gauge(
            f"{ns}_queue_ready", "Fired runs not yet claimed, per shard", ["shard"], registry=r
        )
        self.queue_pending = Gauge(
            f"{ns}_queue_pending",
            "Runs claimed and not yet completed, per shard",
            ["shard"],
            registry=r,
        )
        self.timer_overdue = Gauge(
            f"{ns}_timer_overdue",
            "Timer entries more than 60 s past due, per shard (firing is behind)",
            ["shard"],
            registry=r,
        )
        self.dead_letter_size = Gauge(
            f"{ns}_dead_letter_runs", "Runs in the dead-letter sets", registry=r
        )
        self.runs_stranded = Gauge(
            f"{ns}_runs_stranded",
            "Fired runs no worker has taken for 5 minutes (not running anywhere)",
            registry=r,
        )
        # per queue (core/queues.py): operators name few, so the series stay few
        self.queue_runs_ready = Gauge(
            f"{ns}_queue_runs_ready", "Fired runs not yet claimed, per queue", ["queue"], registry=r
        )
        self.queue_workers = Gauge(
            f"{ns}_queue_workers", "Live workers serving the queue", ["queue"], registry=r
        )
        self.queue_unserved = Gauge(
            f"{ns}_queue_unserved",
            "1 when no live worker serves the queue (its runs wait)",
            ["queue"],
            registry=r,
        )
        # per concurrency key (core/concurrency.py), set by the owner that sweeps it
        self.key_label = LabelLimiter(job_label_limit)
        self.key_waiting = Gauge(
            f"{ns}_concurrency_waiting", "Runs waiting on the key's limits", ["key"], registry=r
        )
        self.key_holding = Gauge(
            f"{ns}_concurrency_holding", "Runs holding the key (running)", ["key"], registry=r
        )
        self.key_wait = Gauge(
            f"{ns}_concurrency_wait_seconds",
            "How long the key's oldest waiting run has waited (its lag)",
            ["key"],
            registry=r,
        )
        self.nodes_alive = Gauge(f"{ns}_nodes_alive", "Nodes with a live heartbeat", registry=r)
        self.workers_alive = Gauge(
            f"{ns}_workers_alive", "Workers with a live heartbeat", registry=r
        )
        self.worker_slots = Gauge(
            f"{ns}_worker_slots", "Execution slots of live workers", registry=r
        )
        self.worker_slots_free = Gauge(
            f"{ns}_worker_slots_free", "Free execution slots of live workers", registry=r
        )
        # execution (worker)
        self.claim_latency = BatchHistogram(
            f"{ns}_worker_claim_latency_seconds",
            "From a run's scheduled time (or its retry coming due) to its claim",
            LAG_BUCKETS,
            r,
        )
        self.runs_finished = Counter(
            f"{ns}_runs_finished", "Runs this worker completed, by end state", ["state"], registry=r
        )
        self.dead_letters = Counter(
            f"{ns}_dead_letter", "Runs dead-lettered (attempts exhausted)", ["job_id"], registry=r
        )
        self.overrunning = Gauge(
            f"{ns}_jobs_overrunning",
            "Runs running longer than 2x their job's recent p99 duration, or near timeout_s",
            ["job_id"],
            registry=r,
        )
        self.overrun_ratio = Gauge(
            f"{ns}_jobs_overrun_ratio",
            "Longest running run of the job over its recent p99 duration (overrunning jobs only)",
            ["job_id"],
            registry=r,
        )
        self.running = Gauge(f"{ns}_runs_running", "Runs executing in this worker", registry=r)
        # every process
        self.redis_errors = Counter(
            f"{ns}_redis_errors",
            "Redis calls that failed and are retried: connection lost, or an error reply "
            "that passes (OOM, LOADING, BUSY, READONLY, MISCONF, NOPERM, ...)",
            ["kind"],
            registry=r,
        )

    def redis_error(self, log: Any, what: str, exc: BaseException, retry_in: float) -> None:
        """Count a failed Redis call and say so: the caller backs off and tries again."""
        kind = error_kind(exc)
        self.redis_errors.labels(kind).inc()
        log.warning("%s failed (%s); retrying in %.2f s", what, exc, retry_in)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def metric_names(metrics: Metrics) -> set[str]:
    """Every sample name the registry can export (for checking the alert rules)."""
    names: set[str] = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.update({f"{family.name}_total", f"{family.name}_created"})
        if family.type == "histogram":
            names.update(f"{family.name}_{s}" for s in ("bucket", "count", "sum", "created"))
    return names


def refresh_cluster(metrics: Metrics, status: Any) -> None:
    """Set the cluster-state gauges from a reading of
    :class:`shardsched.ops.deployment.status.Status`."""
    metrics.nodes_alive.set(len(status.nodes))
    for s in status.shards:
        label = str(s.shard)
        metrics.epoch.labels(label).set(s.epoch)
        metrics.shard_owned.labels(label).set(1 if s.live else 0)
        metrics.queue_ready.labels(label).set(s.ready)
        metrics.queue_pending.labels(label).set(s.pending)
        metrics.timer_overdue.labels(label).set(s.overdue)
    for q in status.queues:
        metrics.queue_runs_ready.labels(q.queue).set(q.ready)
        metrics.queue_workers.labels(q.queue).set(q.workers)
        metrics.queue_unserved.labels(q.queue).set(1 if q.unserved else 0)
    metrics.dead_letter_size.set(status.dead_letter)
    metrics.runs_stranded.set(status.stranded)
    metrics.workers_alive.set(len(status.workers))
    metrics.worker_slots.set(status.slots)
    metrics.worker_slots_free.set(status.slots_free)
