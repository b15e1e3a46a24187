"""Each Lua script through the same calls the service makes, on real Redis."""

from __future__ import annotations

import subprocess

import hiredis

from conftest import RedisServer, keyspace
from shardsched import IntervalSchedule, JobSpec, ops
from shardsched.store.drive import call_script, drive_async
from shardsched.store.lua import runs as runs_lua
from shardsched.store.redis import Redis


async def register(redis: Redis, dep: ops.Deployment, every_s: float = 60) -> str:
    spec = JobSpec(name="j", schedule=IntervalSchedule(every_s=every_s), command="true")
    created = await drive_async(ops.create_job(dep, spec), redis)
    return created.job_id


async def acquire(
    redis: Redis, dep: ops.Deployment, shard: int, node: str, live: str = "a,b,old,new"
) -> list:
    sk = dep.shard(shard)
    return await redis.script("acquire_lease", (sk.owner, sk.epoch), (node, 5000, live))


async def fire(redis: Redis, dep: ops.Deployment, shard: int, epoch: int, *triples) -> list:
    """Fire (job, old, new) triples as plain firings of the old tick."""
    sk = dep.shard(shard)
    head = (epoch, sk.base, 500, 0, 0)
    items = []
    for i in range(0, len(triples), 3):
        job, old, new = triples[i : i + 3]
        items += [job, old, old, new, "", "a", "", ""]
    keys = (sk.timer, sk.ready, sk.epoch, sk.stats, sk.retries, sk.autopause)
    return await redis.script("fire", keys, (*head, *items))


async def timer_score(redis: Redis, dep: ops.Deployment, job_id: str) -> int:
    sk = dep.keys_for(job_id)
    return int(float(await redis.execute("ZSCORE", sk.timer, job_id)))


async def make_due(redis: Redis, dep: ops.Deployment, job_id: str) -> int:
    """Move the job's timer entry a second into the past; returns the new score."""
    due = await redis.time_ms() - 1000
    await redis.execute("ZADD", dep.keys_for(job_id).timer, due, job_id)
    return due


async def test_leases_fence_by_epoch(redis, dep) -> None:
    assert await acquire(redis, dep, 0, "a") == [1]
    refused = await acquire(redis, dep, 0, "b")
    assert refused[0] == -1 and refused[1] == b"a"
    assert await acquire(redis, dep, 0, "a") == [2]  # a restart of "a" still gets a new epoch
    sk = dep.shard(0)
    renew_keys = (sk.owner, sk.epoch, sk.stats)
    assert await redis.script("renew_lease", renew_keys, ("a", 1, 5000)) == -1
    assert await redis.script("renew_lease", renew_keys, ("a", 2, 5000)) == 1
    assert await redis.execute("HGET", sk.stats, "refused_renew") == b"1"
    assert await redis.script("release_lease", (sk.owner, sk.epoch), ("b", 2)) == 0
    assert await redis.script("release_lease", (sk.owner, sk.epoch), ("a", 2)) == 1
    assert await acquire(redis, dep, 0, "b") == [3]


async def test_a_lease_of_a_node_gone_from_the_registry_is_taken_at_once(redis, dep) -> None:
    """The holder is not among the live nodes the caller read: taken before its TTL, at a
    new epoch (which fences whatever the old holder still sends)."""
    assert await acquire(redis, dep, 1, "a") == [1]
    refused = await acquire(redis, dep, 1, "b", live="a,b")
    assert refused[0] == -1 and refused[2] > 4000  # a is live: its lease stands
    assert await acquire(redis, dep, 1, "b", live="b") == [2]  # a is gone: taken now
    sk = dep.shard(1)
    assert await redis.execute("GET", sk.owner) == b"b"
    assert await redis.script("renew_lease", (sk.owner, sk.epoch, sk.stats), ("a", 1, 5000)) == -1


async def test_fire_refuses_a_stale_epoch_and_writes_nothing(redis, dep) -> None:
    job = await register(redis, dep)
    shard = dep.keys_for(job).shard
    await acquire(redis, dep, shard, "old")
    await redis.execute("DEL", dep.shard(shard).owner)
    await acquire(redis, dep, shard, "new")  # epoch 2
    old = await timer_score(redis, dep, job)
    before = await keyspace(redis, dep.namespace)
    reply = await fire(redis, dep, shard, 1, job, old, old + 60_000)
    assert reply == [-1, b"2"]
    after = await keyspace(redis, dep.namespace)
    stats = after.pop(dep.shard(shard).stats.encode())
    assert after == before, "nothing but the refusal counter was written"
    assert stats is not None
    assert await redis.execute("HGET", dep.shard(shard).stats, "refused_fire") == b"1"


async def test_fire_is_idempotent_and_compare_and_set(redis, dep) -> None:
    job = await register(redis, dep)
    sk = dep.keys_for(job)
    (epoch,) = await acquire(redis, dep, sk.shard, "n")
    old = await make_due(redis, dep, job)
    first = await fire(redis, dep, sk.shard, epoch, job, old, old + 60_000)
    assert first[0] == 1 and first[2] == 1
    # A replay of the same batch (a lost reply, a new owner) finds the timer moved on.
    again = await fire(redis, dep, sk.shard, epoch, job, old, old + 60_000)
    assert again[2] == 0
    # Even with the timer put back, the run record exists: create-if-absent dedupes.
    await redis.execute("ZADD", sk.timer, old, job)
    third = await fire(redis, dep, sk.shard, epoch, job, old, old + 60_000)
    assert third[2] == 0
    assert await redis.execute("XLEN", sk.ready) == 1
    rid = f"{job}:{old}:1"
    assert await redis.execute("HGET", sk.run(rid), "st") == b"scheduled"
    assert await redis.execute("ZRANGE", sk.runs_of(job), 0, -1) == [rid.encode()]
    assert await timer_score(redis, dep, job) == old + 60_000
    # An item planned ahead of its tick is not fired before it.
    ahead = await redis.time_ms() + 60_000
    await redis.execute("ZADD", sk.timer, ahead, job)
    early = await fire(redis, dep, sk.shard, epoch, job, ahead, ahead + 60_000)
    assert early[2] == 0 and await timer_score(redis, dep, job) == ahead
    await redis.execute("ZADD", sk.timer, old + 60_000, job)
    # A mismatched old score (a PATCH won the race) fires nothing.
    stale = await fire(redis, dep, sk.shard, epoch, job, old - 5, old + 1)
    assert stale[2] == 0 and await timer_score(redis, dep, job) == old + 60_000


async def test_fire_reports_due_jobs_and_next_score(redis, dep) -> None:
    job = await register(redis, dep, every_s=60)
    sk = dep.keys_for(job)
    (epoch,) = await acquire(redis, dep, sk.shard, "n")
    score = await timer_score(redis, dep, job)
    reply = await fire(redis, dep, sk.shard, epoch)
    now = int(reply[1])
    assert reply[2] == 0 and reply[3] == 0 and int(reply[4]) == score > now
    assert reply[5:] == [b"", b""]  # the queues; nothing an overlap policy held back
    await redis.execute("ZADD", sk.timer, now - 1000, job)
    reply = await fire(redis, dep, sk.shard, epoch)
    assert reply[4] == b"" and reply[7] == job.encode() and int(reply[8]) == now - 1000
    assert b'"every_s":60' in reply[9]


async def test_claim_and_fenced_completion(redis, dep) -> None:
    job = await register(redis, dep)
    sk = dep.keys_for(job)
    (epoch,) = await acquire(redis, dep, sk.shard, "n")
    old = await make_due(redis, dep, job)
    await fire(redis, dep, sk.shard, epoch, job, old, old + 60_000)
    claimed = await call_script(redis, runs_lua.claim(sk, dep.globals, "w1", 10))
    assert len(claimed) == 9 and claimed[8] == b""  # no args of its own
    eid, rid, spec, sched, attempt, token = claimed[:6]
    # a fired run's tick and attempt are its id's: the script leaves them to the decoder
    assert rid == f"{job}:{old}:1".encode() and sched == b"" and attempt == b""
    (entry,) = runs_lua.decode_claimed(claimed)
    assert (entry.run_id, entry.scheduled_ms, entry.attempt) == (rid.decode(), old, 1)
    assert b'"command":"true"' in spec
    run = await redis.execute("HMGET", sk.run(rid.decode()), "st", "w")
    assert run == [b"running", b"w1"]
    assert await call_script(redis, runs_lua.claim(sk, dep.globals, "w2", 10)) == []

    run_key = sk.run(rid.decode())

    async def complete(worker: str, tok: int, state: str, output: str = "") -> int:
        delivery = runs_lua.Delivery(eid.decode(), rid.decode(), tok)
        exit_code = 0 if state == "succeeded" else 1
        done = runs_lua.Completion(delivery, state, exit_code, "", output.encode(), 123, "")
        reply = await call_script(redis, runs_lua.complete(sk, dep.globals, worker, [done]))
        return runs_lua.decode_completed(reply).codes[0]

    assert await complete("w2", token, "succeeded") == -2  # not the holder
    assert await complete("w1", token + 1, "succeeded") == -2  # an older delivery
    assert await redis.execute("HGET", run_key, "sx") == b"2"
    assert await redis.execute("HGET", run_key, "st") == b"running"
    assert await complete("w1", token, "succeeded", "out") == 1
    assert await redis.execute("HMGET", run_key, "st", "x", "xs") == [b"succeeded", b"0", b"123"]
    assert await redis.execute("GET", sk.output(rid.decode())) == b"out"
    assert await redis.execute("XLEN", sk.ready) == 0
    # The same completion again (a retry after a lost reply) is a no-op; a different one
    # for the finished run is refused.
    assert await complete("w1", token, "succeeded") == 0
    assert await complete("w1", token, "failed") == -2
    assert await redis.execute("HGET", run_key, "st") == b"succeeded"


async def test_scripts_are_refused_whole_when_redis_is_out_of_memory(
    own_redis_server: RedisServer,
) -> None:
    redis = Redis(own_redis_server.url, size=2)
    try:
        dep = await drive_async(ops.open_deployment("oom", 4), redis)
        job = await register(redis, dep)
        sk = dep.keys_for(job)
        (epoch,) = await acquire(redis, dep, sk.shard, "n")
        old = await timer_score(redis, dep, job)
        subprocess.run(
            ["redis-cli", "-p", str(own_redis_server.port), "CONFIG", "SET", "maxmemory", "1"],
            check=True,
            capture_output=True,
        )
        before = await keyspace(redis, "oom")
        reply = (
            await redis.scripts(
                [
                    (
                        "fire",
                        (sk.timer, sk.ready, sk.epoch, sk.stats, sk.retries, sk.autopause),
                        (epoch, sk.base, 500, 0, 0, job, old, old, old + 1, "", "a"),
                    )
                ]
            )
        )[0]
        assert isinstance(reply, hiredis.ReplyError) and "OOM" in str(reply)
        assert await keyspace(redis, "oom") == before
    finally:
        await redis.aclose()
