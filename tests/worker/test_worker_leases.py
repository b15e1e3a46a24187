"""Worker leases with real processes: a killed worker's run is delivered again under the same
run id; a paused worker cannot complete a run it no longer holds."""

from __future__ import annotations

import signal
import subprocess

import pytest
import trio

from conftest import child_env, shardsched_cmd, wait_until
from shardsched import ops
from shardsched.core.instants import from_ms
from shardsched.core.models import JobSpec, OnceSchedule
from shardsched.ops.deployment.cluster import list_workers
from shardsched.ops.history import audit
from shardsched.store.drive import drive_async
from workers import lines_at_least, once_job, wait_run

pytestmark = pytest.mark.processes


async def run_fields(redis, dep, rid: str, *fields: str) -> list:
    return await redis.execute("HMGET", dep.keys_for(rid).run(rid), *fields)


async def test_killed_worker_run_is_delivered_again_with_the_same_run_id(
    node, redis, dep, workers, tmp_path
) -> None:
    marks = tmp_path / "executions"
    command = f'echo "$SHARDSCHED_RUN_ID $SHARDSCHED_ATTEMPT" >> {marks}; sleep 2'
    job_id = await once_job(redis, dep, command, lease_s=1, timeout_s=30)
    w1 = workers("w1")
    await wait_until(lambda: lines_at_least(marks, 1), timeout=15)
    w1.send_signal(signal.SIGKILL)
    w1.wait()
    workers("w2")

    runs = await wait_run(redis, dep, job_id, "succeeded")
    assert len(runs) == 1, "one trigger: the same run, not a new one"
    run = runs[0]
    assert run.claimed_by == "w2" and run.attempt == 1
    executions = marks.read_text().split("\n")[:-1]
    assert executions == [f"{run.run_id} 1", f"{run.run_id} 1"], executions
    deliveries, reclaims = await run_fields(redis, dep, run.run_id, "dt", "rc")
    assert (int(deliveries) % 1000, reclaims) == (2, b"1")  # the token's delivery count
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.fired == 1 and report.duplicated == 0 and report.missing == 0


async def test_paused_worker_cannot_complete_a_run_it_lost(
    node, redis, dep, workers, tmp_path
) -> None:
    marks = tmp_path / "executions"
    command = f'echo "$SHARDSCHED_RUN_ID" >> {marks}; sleep 1.5; echo done'
    job_id = await once_job(redis, dep, command, lease_s=1)
    w1 = workers("w1")
    await wait_until(lambda: lines_at_least(marks, 1), timeout=15)
    w1.send_signal(signal.SIGSTOP)  # a long GC pause, a frozen VM: its lease lapses
    workers("w2")

    rid = (await wait_run(redis, dep, job_id, "succeeded", by="w2"))[0].run_id
    w1.send_signal(signal.SIGCONT)  # it wakes believing it still runs the job

    async def refused() -> bool:
        (superseded,) = await run_fields(redis, dep, rid, "sx")
        return int(superseded or 0) >= 1

    await wait_until(refused, timeout=15)
    state, claimed_by, superseded = await run_fields(redis, dep, rid, "st", "w", "sx")
    assert (state, claimed_by) == (b"succeeded", b"w2"), "the stale worker changed nothing"
    assert int(superseded or 0) >= 1, "its renewal or completion was refused and recorded"


@pytest.mark.slow  # out of the default run, which stays near 8 min
async def test_sigterm_drains_and_hands_runs_back_well_under_a_lease(
    node, redis, dep, workers, tmp_path
) -> None:
    flag = tmp_path / "first-execution-started"
    command = f"if [ -f {flag} ]; then echo second; else touch {flag}; sleep 60; fi"
    w1 = workers("w1", "--drain-grace", "1")
    job_id = await once_job(redis, dep, command, lease_s=60)
    first = (await wait_run(redis, dep, job_id, "running", timeout=15))[0]
    await wait_until(lambda: lines_at_least(flag, 0), timeout=15)
    assert first.claimed_by == "w1"
    workers("w2")

    async def both_listed() -> dict | None:
        listed = await drive_async(list_workers(dep), redis)
        by_id = {w.worker_id: w for w in listed.workers}
        ok = set(by_id) == {"w1", "w2"} and by_id["w1"].running == 1  # heartbeats: every 2 s
        return by_id if ok else None

    listed = await wait_until(both_listed)
    assert listed["w1"].capacity == 4 and listed["w1"].capacity_free == 3
    assert listed["w2"].capacity_free == 4 and not listed["w2"].draining
    victim = w1
    start = trio.current_time()
    victim.send_signal(signal.SIGTERM)

    await wait_run(redis, dep, job_id, "succeeded", by="w2")
    handed_over = trio.current_time() - start
    print(f"drained and handed over in {handed_over:.2f} s (lease 60 s)")
    assert handed_over < 10, "handed back at once, not after the 60 s lease"
    assert await trio.to_thread.run_sync(victim.wait, 10) == 0
    listed = await drive_async(list_workers(dep), redis)
    assert [w.worker_id for w in listed.workers] == ["w2"], "a drained worker leaves the registry"
    out = await drive_async(ops.get_output(dep, first.run_id), redis)
    assert out.output == "second\n"


async def test_worker_imports_handler_modules(node, redis, dep, workers, tmp_path) -> None:
    seen = tmp_path / "seen"
    (tmp_path / "my_handlers.py").write_text(
        "from shardsched.worker.handlers import handler\n"
        "@handler('greet')\n"
        "def greet(ctx):\n"
        f"    open({str(seen)!r}, 'w').write(f'{{ctx.run_id}} {{ctx.attempt}}')\n"
    )
    env = {**child_env(), "PYTHONPATH": str(tmp_path)}
    workers("w1", "--import", "my_handlers", env=env)
    job_id = await once_job(redis, dep, "handler:greet", lease_s=30)

    run = (await wait_run(redis, dep, job_id, "succeeded", timeout=15))[0]
    assert seen.read_text() == f"{run.run_id} 1"
    bad = subprocess.run(
        shardsched_cmd(
            "worker", "--redis", "redis://127.0.0.1:1", "--import", "no_such_module_xyz"
        ),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=30,
    )
    assert bad.returncode != 0 and "no_such_module_xyz" in bad.stderr


@pytest.mark.slow  # ~18 s; the default suite kills one worker / one node
async def test_chaos_1000_runs_through_4_workers_killed_at_random(
    node, redis, dep, workers, tmp_path
) -> None:
    import random

    marks = tmp_path / "executions"
    now = await redis.time_ms()
    spec = JobSpec(
        name="chaos",
        schedule=OnceSchedule(at=from_ms(now + 500)),
        lease_s=1,
        timeout_s=10,
        command=f'echo "$SHARDSCHED_RUN_ID" >> {marks}; sleep 0.2',
    )
    created = await drive_async(ops.create_jobs(dep, [spec] * 1000), redis)
    alive = {f"w{i}": workers(f"w{i}") for i in range(4)}
    rng = random.Random(42)
    kills = 0

    async def states() -> dict[str, int]:
        calls = [
            ("HGET", dep.keys_for(c.job_id).run(f"{c.job_id}:{now + 500}:1"), "st") for c in created
        ]
        replies = await redis.pipeline(calls)
        out: dict[str, int] = {}
        for st in replies:
            key = (st or b"none").decode()
            out[key] = out.get(key, 0) + 1
        return out

    with trio.fail_after(90):
        generation = 0
        while True:
            counts = await states()
            if counts.get("succeeded", 0) + counts.get("failed", 0) == 1000:
                break
            await trio.sleep(rng.uniform(0.3, 1.0))  # chaos: a random gap between kills
            if kills < 8:
                victim = rng.choice(sorted(alive))
                alive.pop(victim).kill()  # SIGKILL, mid-job
                kills += 1
                generation += 1
                name = f"w{generation + 3}"
                alive[name] = workers(name)
    counts = await states()
    print(f"chaos: {kills} workers killed; final states {counts}")
    assert counts.get("succeeded", 0) + counts.get("failed", 0) == 1000, "every run terminal"
    executions = marks.read_text().split()
    per_run: dict[str, int] = {}
    for rid in executions:
        per_run[rid] = per_run.get(rid, 0) + 1
    assert len(per_run) == 1000, "every run executed"
    again = sum(1 for n in per_run.values() if n > 1)
    print(f"runs executed more than once (at-least-once, after a kill): {again}")
    assert again <= kills * 4 * 2, "re-executions only for runs a killed worker held"
    report = await drive_async(audit.audit(dep, settle_s=0), redis)
    assert report.fired == 1000 and report.duplicated == 0 and report.missing == 0
    # A run is completed once: any later completion for it was refused, never applied.
    finished = await redis.pipeline(
        [("HGET", dep.keys_for(c.job_id).run(f"{c.job_id}:{now + 500}:1"), "f") for c in created]
    )
    assert all(f is not None for f in finished)


async def test_restart_under_the_same_id_takes_up_its_pending_runs_first(
    node, redis, dep, workers, tmp_path
) -> None:
    marks = tmp_path / "executions"
    job_id = await once_job(redis, dep, f'echo "$SHARDSCHED_RUN_ID" >> {marks}; sleep 1', 60)
    w1 = workers("w1")
    await wait_until(lambda: lines_at_least(marks, 1), timeout=15)
    w1.send_signal(signal.SIGKILL)
    w1.wait()
    start = trio.current_time()
    workers("w1")  # the same worker id, restarted (a reconnect looks the same to Redis)

    (run,) = await wait_run(redis, dep, job_id, "succeeded")
    took = trio.current_time() - start
    print(f"taken up again in {took:.2f} s (lease 60 s)")
    assert took < 10, "its own pending run was taken up at once, not after the lease"
    assert run.claimed_by == "w1"
    assert marks.read_text().split() == [run.run_id, run.run_id]
