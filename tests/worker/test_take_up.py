"""A worker's take-up of runs pending on its id (worker/take_up.py) starts one only once
its lease is renewed while the run is still its own.

The nemesis (#53, seed 2, durable mode on both replicas) executed seven runs twice, 0.25 s
apart on two workers: a claim answered "not durable" was applied but unknown to the
worker, so nothing renewed its runs' leases; they lapsed; the worker's take-up read them
pending on its id, the owner reclaimed them and delivered them to the other worker, and
the take-up then started them from what it had read."""

from __future__ import annotations

import trio

from conftest import wait_until
from shardsched.store.drive import call_script
from shardsched.store.lua import runs as lua
from shardsched.worker.take_up import _renewed, pending_here
from workers import once_job, wait_run


async def _claimed_by_hand(redis, dep, worker_id: str, lease_s: float) -> tuple[str, int]:
    """A run claimed as ``worker_id`` (no worker runs it); its id and shard."""
    job_id = await once_job(redis, dep, "true", lease_s)
    (run,) = await wait_run(redis, dep, job_id, "scheduled")
    shard = int(dep.keys_for(run.run_id).base.rsplit("{", 1)[1].split("}")[0])
    got = await call_script(redis, lua.claim(dep.shard(shard), dep.globals, worker_id, 10))
    assert run.run_id in [e.run_id for e in lua.decode_claimed(got)]
    return run.run_id, shard


async def test_a_run_the_owner_took_back_after_the_read_is_not_started(node, redis, dep) -> None:
    run_id, shard = await _claimed_by_hand(redis, dep, "w-lost", lease_s=1)
    read = await call_script(redis, lua.pending_runs(dep.shard(shard), "w-lost"))
    entries = [e for e in lua.decode_claimed(read) if e.run_id == run_id]
    assert entries, "the take-up's read finds the run pending on the worker"

    async def taken_back() -> bool:  # the node's reclaimer, once the 1 s lease lapsed
        rc = await redis.execute("HGET", dep.keys_for(run_id).run(run_id), "rc")
        return rc == b"1"

    await wait_until(taken_back, timeout=15)
    assert await _renewed(redis, dep, "w-lost", shard, entries) == []


async def test_a_run_still_held_is_renewed_then_taken_up(node, redis, dep) -> None:
    run_id, _shard = await _claimed_by_hand(redis, dep, "w-back", lease_s=60)
    run_key = dep.keys_for(run_id).run(run_id)
    claimed_lease = int(await redis.execute("HGET", run_key, "l"))
    found = await pending_here(redis, dep, "w-back", ("",), set)
    (taken,) = [c for runs in found.values() for c in runs]
    assert taken.run_id == run_id
    lease = int(await redis.execute("HGET", run_key, "l"))
    assert lease >= claimed_lease
    assert taken.claimed_ms + 60_000 == lease  # renewed, at the server time it carries
    # a run the worker holds or settled lately is not taken up again
    assert await pending_here(redis, dep, "w-back", ("",), lambda: {run_id}) == {}


async def test_a_run_taken_up_keeps_its_trace_as_a_redelivery(node, redis, dep) -> None:
    """A run executed again by the same worker id after its process died is kept like a
    redelivery, sampled or not (its first execution's spans died with the process)."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from shardsched.runtime.tracing import RunTracer
    from shardsched.worker.worker import Worker
    from traces import run_spans

    run_id, _shard = await _claimed_by_hand(redis, dep, "w-again", lease_s=60)
    spans = InMemorySpanExporter()
    tracer = RunTracer.for_tests(spans, sampler=ALWAYS_OFF)
    async with trio.open_nursery() as nursery:
        await nursery.start(Worker(redis, dep, worker_id="w-again", tracer=tracer).run)
        await wait_run(redis, dep, run_id.split(":")[0], "succeeded")

        async def attempt() -> list:
            got = run_spans(spans.get_finished_spans(), run_id)
            return [s for s in got if s.name == "shardsched.attempt"]

        (span,) = await wait_until(attempt, timeout=20)
        nursery.cancel_scope.cancel()
    assert span.attributes["shardsched.kept"] == "redelivered"
    assert span.attributes["shardsched.state"] == "succeeded"
