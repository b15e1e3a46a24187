"""Every process under its Redis ACL role (``shardsched acl``) on a real Redis: a node and
a worker run jobs, the SDK and the audit read as ``reader``, and what a role must not do
is refused, from Python and from inside a Lua script."""

from __future__ import annotations

import json
import logging
import subprocess

import pytest
import redis as redis_py
import trio

from conftest import RedisServer, child_env, shardsched_cmd, wait_until
from shardsched import Client, IntervalSchedule, JobSpec, OnceSchedule, ops
from shardsched.core.instants import from_ms
from shardsched.ops import listing
from shardsched.service import check_redis_config
from shardsched.shard.manager import ShardManager
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis, ReplyError
from shardsched.worker.worker import Worker

NS = "acl"
#: How Redis refuses a command to a user: from a client, and from inside a script.
DENIED = r"NOPERM|no permissions|can.t run this command|can.t access at least one of the keys"


@pytest.fixture
def users(own_redis_server: RedisServer) -> dict[str, str]:
    """One ACL user per role, made from ``shardsched acl``'s own output; their URLs."""
    out = subprocess.run(
        shardsched_cmd("acl", "--namespace", NS),
        capture_output=True,
        text=True,
        env=child_env(),
        check=True,
    )
    admin = redis_py.Redis(port=own_redis_server.port)
    for line in out.stdout.splitlines():
        words = line.split()
        assert words[:2] == ["ACL", "SETUSER"]
        words = [w.replace(">CHANGE-ME", f">pw-{words[2]}") for w in words]
        admin.execute_command(*words)
    admin.close()
    port = own_redis_server.port
    return {role: f"redis://{NS}-{role}:pw-{NS}-{role}@127.0.0.1:{port}/0" for role in
            ("node", "worker", "reader")}  # fmt: skip


async def test_each_process_works_under_its_role(users, caplog) -> None:
    node_redis = Redis(users["node"], size=8)
    worker_redis = Redis(users["worker"], size=8)
    try:
        dep = await drive_async(ops.open_deployment(NS, 4), node_redis)
        with caplog.at_level(logging.WARNING):
            await check_redis_config(node_redis, allow_eviction=False)  # CONFIG: NOPERM
        assert "cannot check Redis maxmemory-policy" in caplog.text
        async with trio.open_nursery() as nursery:
            await nursery.start(ShardManager(node_redis, dep, node_id="n", renew_every_s=0.5).run)
            await nursery.start(Worker(worker_redis, dep, "w", concurrency=4).run)
            once = OnceSchedule(at=from_ms(0))
            specs = [JobSpec(name=f"j{i}", schedule=once, command="echo ok") for i in range(5)]
            specs.append(
                JobSpec(name="tick", schedule=IntervalSchedule(every_s=0.5), command="true")
            )
            created = await drive_async(ops.create_jobs(dep, specs), node_redis)

            async def all_ran() -> bool:
                for c in created:
                    runs = (await drive_async(listing.runs_page(dep, c.job_id, 5), node_redis)).runs
                    if not any(r.state == "succeeded" for r in runs):
                        return False
                return True

            await wait_until(all_ran, timeout=20)

            # the reader: the SDK reads, the audit and status run, and a write is refused
            def read() -> None:
                with Client(users["reader"], namespace=NS) as sdk:
                    assert sdk.get_job(created[0].job_id).name == "j0"
                    assert sdk.list_runs(created[0].job_id).runs[0].state == "succeeded"
                    with pytest.raises(Exception, match=DENIED):
                        sdk.add_job(specs[0])

            await trio.to_thread.run_sync(read)
            for command in (("audit", "--settle", "1"), ("status",)):
                out = await trio.to_thread.run_sync(
                    lambda c=command: subprocess.run(
                        shardsched_cmd(*c, "--namespace", NS),
                        capture_output=True,
                        text=True,
                        env={**child_env(), "SHARDSCHED_REDIS_URL": users["reader"]},
                        timeout=120,
                    )
                )
                assert out.returncode == 0, (command, out.stdout, out.stderr)
                assert "NOPERM" not in out.stderr
            nursery.cancel_scope.cancel()
        names = [j.name for j in (await drive_async(listing.jobs_page(dep, 100), node_redis)).jobs]
        assert len(names) == 6  # the reader's add_job wrote nothing
    finally:
        await node_redis.aclose()
        await worker_redis.aclose()


@pytest.mark.parametrize("role", ["node", "worker", "reader"])
async def test_what_a_role_must_not_do_is_refused(users, own_redis_server, role: str) -> None:
    admin = redis_py.Redis(port=own_redis_server.port, decode_responses=True)
    for command in ("flushall", "flushdb", "config get x", "keys *", "debug sleep 0", "acl list"):
        verdict = admin.execute_command("ACL", "DRYRUN", f"{NS}-{role}", *command.split())
        assert "no permissions" in verdict, (role, command, verdict)
    admin.close()
    redis = Redis(users[role], size=2)
    try:
        refused = [
            ("FLUSHALL",),
            ("FLUSHDB",),
            ("CONFIG", "GET", "maxmemory-policy"),
            ("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"),
            ("KEYS", "*"),
            ("ACL", "LIST"),
            ("SHUTDOWN", "NOSAVE"),
            ("GET", "other:key"),  # outside the deployment's keys
            ("EVAL", "return redis.call('FLUSHALL')", "0"),  # nor from inside a script
            ("EVAL", "return redis.call('GET', 'other:key')", "0"),
        ]
        if role == "reader":
            refused += [
                ("SET", f"{NS}:x", "1"),
                ("EVAL", f"return redis.call('SET', '{NS}:x', 1)", "0"),
            ]
        for command in refused:
            with pytest.raises(ReplyError, match=DENIED):
                await redis.execute(*command)
        assert await redis.execute("PING") == b"PONG"
    finally:
        await redis.aclose()


async def test_a_worker_runs_everything_under_its_role_and_writes_nothing_else(
    users, caplog
) -> None:
    """The worker role writes only what running runs needs: a DAG's releases, retries to
    a dead letter, an auto-pause, live output and a hand-back all work under it; a token,
    the token log, the node registry, the deployment's meta and a shard's lease are
    refused to it, from a client and from inside a script."""
    from shardsched.core.concurrency import LimitRequest
    from shardsched.core.models import DagSpec, RetryPolicy, TaskSpec
    from shardsched.ops.access import tokens
    from shardsched.ops.dags import manage as dag_ops
    from shardsched.ops.deployment import concurrency

    node_redis = Redis(users["node"], size=8)
    worker_redis = Redis(users["worker"], size=8)
    try:
        dep = await drive_async(ops.open_deployment(NS, 4), node_redis)
        async with trio.open_nursery() as nursery:
            await nursery.start(ShardManager(node_redis, dep, node_id="n", renew_every_s=0.5).run)
            worker = Worker(worker_redis, dep, "w", concurrency=4)
            await nursery.start(worker.run)
            once = OnceSchedule(at=from_ms(0))
            no_retry = RetryPolicy(max_attempts=2, base_s=0, jitter=False)
            specs = [
                JobSpec(name="fails", schedule=once, command="exit 3", retry_policy=no_retry),
                JobSpec(name="talks", schedule=once, command="echo a; sleep 3; echo b"),
                JobSpec(name="streak", schedule=IntervalSchedule(every_s=0.5),
                        command="exit 1", auto_pause_after=2),
                # one key, limit 1 (set by the node): one waits, parked and put back
                JobSpec(name="held-1", schedule=once, command="sleep 0.3",
                        concurrency_key="acl-key"),
                JobSpec(name="held-2", schedule=once, command="sleep 0.3",
                        concurrency_key="acl-key"),
            ]  # fmt: skip
            await drive_async(
                concurrency.set_limits(dep, "acl-key", LimitRequest(limit=1), "t"), node_redis
            )
            created = await drive_async(ops.create_jobs(dep, specs), node_redis)
            dag = DagSpec(
                name="d",
                schedule=once,
                tasks=[
                    TaskSpec(name="a", command="true"),
                    TaskSpec(name="b", command="true", depends_on=["a"]),
                ],
            )
            dag_id = (await drive_async(dag_ops.create_dag(dep, dag), node_redis)).dag_id

            async def settled() -> bool:
                fails = await drive_async(listing.runs_page(dep, created[0].job_id, 5), node_redis)
                talks = await drive_async(listing.runs_page(dep, created[1].job_id, 5), node_redis)
                streak = await drive_async(ops.get_job(dep, created[2].job_id), node_redis)
                dag_runs = await drive_async(listing.dag_runs_page(dep, dag_id, 5), node_redis)
                held = [
                    await drive_async(listing.runs_page(dep, c.job_id, 1), node_redis)
                    for c in created[3:]
                ]
                return (
                    all(h.runs and h.runs[0].state == "succeeded" for h in held)
                    and any(r.state == "dead_letter" for r in fails.runs)
                    and any(r.state == "succeeded" for r in talks.runs)
                    and streak.status == "paused"
                    and any(r.state == "succeeded" for r in dag_runs.dag_runs)
                )

            await wait_until(settled, timeout=30)
            talks = await drive_async(listing.runs_page(dep, created[1].job_id, 1), node_redis)
            out = await drive_async(ops.get_output(dep, talks.runs[0].run_id), node_redis)
            assert out.output == "a\nb\n", out
            worker.drain()  # hands back what it holds, under its role too
            nursery.cancel_scope.cancel()
        # no script of the worker's was refused on the way (a live-output flush used to be)
        assert "can't run this command" not in caplog.text, caplog.text
        assert "NOPERM" not in caplog.text, caplog.text
        assert worker.limits.parked >= 1  # the second keyed run waited its turn

        g, shard = dep.globals, dep.shard(0)
        streak_id = created[2].job_id
        sk = dep.keys_for(streak_id)
        dk = dep.keys_for(dag_id)
        refused = [
            ("HSET", g.tokens, "h:" + "0" * 64, '{"name":"x","scopes":["admin"]}'),
            ("XADD", g.tokenlog, "*", "a", "created"),
            ("ZADD", g.nodes, "1", "rogue-node"),
            ("HSET", g.meta, "shards", "1"),
            ("SET", shard.owner, "rogue-node"),
            ("INCR", shard.epoch),
            # a job's definition and its place in time are the nodes' alone
            ("HSET", sk.job(streak_id), "status", "active"),
            ("HSET", sk.job(streak_id), "spec", '{"command":"id"}'),
            ("ZADD", sk.timer, "0", streak_id),
            ("HSET", sk.versions(streak_id), "1", "x"),
            ("XADD", sk.changes(streak_id), "*", "a", "resume"),
            ("ZADD", sk.resumes, "0", streak_id),
            # what a run executes: a DAG's kept versions, a DAG run's version and args, a
            # run by hand's args (a worker that wrote them once chose a task's command)
            ("HSET", dk.dag_version(dag_id, 7), "s:b", '{"command":"echo FORGED; id"}'),
            ("HSET", dk.dag_run_given(f"{dag_id}:t1"), "tv", "7"),
            ("HSET", dk.dag_run_given(f"{dag_id}:t1"), "args", '{"x":1}'),
            ("SET", sk.run_args(streak_id, "t1"), '{"x":1}'),
            ("DEL", sk.run_args(streak_id, "t1")),
            # a node's key holding user text that ends like a worker's key (an idempotency
            # key 'x}:run:y') is still a node's: the worker's globs name the shard's tag
            ("SET", sk.idempotency(streak_id, "x}:run:y"), "other:t1:1"),
            # a concurrency key's limits and their log are the nodes' too
            ("HSET", dep.concurrency("acl-key").limits, "limit", "100"),
            ("LPUSH", dep.concurrency("acl-key").changes, "x"),
            (
                "EVAL",
                "return redis.call('HSET', KEYS[1], 'status', 'active')",
                "1",
                sk.job(streak_id),
            ),
            ("EVAL", "return redis.call('HSET', KEYS[1], 'h:y', '{}')", "1", g.tokens),
            ("EVAL", "return redis.call('SET', KEYS[1], 'rogue')", "1", shard.owner),
        ]
        # no code of its own: a script that writes a key and loops would leave Redis
        # unkillable (SCRIPT KILL -> UNKILLABLE) until SHUTDOWN NOSAVE
        loop = "redis.call('INCR', KEYS[1]) while true do end"
        refused += [
            ("EVAL", loop, "1", sk.run("x:1:1")),
            ("SCRIPT", "LOAD", loop),
            ("FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('x', function() end)"),
            ("FUNCTION", "FLUSH"),
        ]
        for command in refused:
            with pytest.raises(ReplyError, match=DENIED):
                await worker_redis.execute(*command)
        lib = "#!lua name=ours\nredis.register_function('ours', function() return 1 end)"
        await node_redis.execute("FUNCTION", "LOAD", lib)
        assert await worker_redis.execute("FCALL", "ours", "0") == 1  # what a node loaded
        with pytest.raises(ReplyError, match=DENIED):  # no longer: our scripts are functions
            await worker_redis.execute("EVALSHA", "0" * 40, "0")
        assert await worker_redis.execute("HGET", g.tokens, "n:x") is None  # reads still go
        assert await drive_async(tokens.list_tokens(dep), worker_redis) is not None
    finally:
        await node_redis.aclose()
        await worker_redis.aclose()


def test_every_shard_key_is_the_workers_or_the_nodes_alone() -> None:
    """A key added to store/keys.py is a decision: in the worker's list, or the node's
    alone (the lease, and what a job is: its hash, timer, segments, versions, logs)."""
    import re
    from pathlib import Path

    from shardsched.store.acl import (
        NODE_CK_KEYS,
        NODE_SHARD_KEYS,
        WORKER_CK_KEYS,
        WORKER_SHARD_KEYS,
    )

    store = Path(__file__).resolve().parents[2] / "src/shardsched/store"
    shard_part = (store / "keys.py").read_text()
    shard_part += (store / "watch_keys.py").read_text()  # a shard's too (ShardKeys.watch)
    ck_part = (store / "ck_keys.py").read_text()  # ConcurrencyKeys
    named = set(re.findall(r'self\.base \+ "([a-z_]+:?)"', shard_part))
    assert named == set(WORKER_SHARD_KEYS) | set(NODE_SHARD_KEYS)
    assert not set(WORKER_SHARD_KEYS) & set(NODE_SHARD_KEYS)
    ck_named = set(re.findall(r'self\.base \+ "([a-z_]+:?)"', ck_part))
    assert ck_named == set(WORKER_CK_KEYS) | set(NODE_CK_KEYS)
    assert not set(WORKER_CK_KEYS) & set(NODE_CK_KEYS)
    assert {"owner", "epoch", "job:", "timer", "segs:", "vers:", "chg:"} <= set(NODE_SHARD_KEYS)


#: Commands the code sends that the node role is meant not to have: the start-up check of
#: maxmemory-policy (CONFIG, answered NOPERM under the role: logged, not fatal), what
#: `dev` and the tests send to a server they started themselves, and the ACL command.
NOT_THE_NODES = {"config", "acl", "shutdown", "info", "client", "command", "flushall", "bgsave",
                 "debug", "save", "lastsave", "monitor", "keys", "dbsize",
                 "auth", "hello", "quit"}  # fmt: skip


def test_every_command_the_code_sends_is_in_the_node_role(redis_server: RedisServer) -> None:
    """Every Redis command named in src/ (a quoted upper-case word, as Call(("ZRANGE", …))
    writes them) and in lua/ (``call('XTRIM', …)``) is allowed to the node role, which
    runs the shard owners and the API. The vocabulary is the server's own ``COMMAND
    LIST``, not a list of ours: ``?health=failing`` once answered 503 NOPERM on a
    hardened node (ZREVRANGE was missing), and retention's XTRIM too."""
    import re
    from pathlib import Path

    from shardsched.store.acl import ROLES

    listed = subprocess.run(
        ["redis-cli", "-p", str(redis_server.port), "COMMAND", "LIST"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    known = {c.strip().lower() for c in listed.stdout.split()}
    assert {"zrevrange", "xtrim", "evalsha"} <= known
    known_pairs = {"xgroup|create", "xinfo|groups", "xinfo|stream", "script|load",
                   "function|load", "function|kill", "function|flush",
                   "script|kill", "script|exists", "cluster|slots", "cluster|shards",
                   "cluster|info", "client|setname", "client|kill"}  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    used: dict[str, str] = {}
    for path in (root / "src/shardsched").rglob("*.py"):
        if "bench" in path.parts:
            continue
        text = path.read_text()
        for m in re.finditer(r'\(\s*"([A-Z]+)"(?:\s*,\s*"([A-Z]+)")?', text):
            word = m.group(1).lower()
            if word in known:
                sub = (m.group(2) or "").lower()
                pair = f"{word}|{sub}"
                used[pair if pair in known_pairs else word] = str(path)
    for path in (root / "lua").rglob("*.lua"):
        pattern = r"""call\(\s*['"]([A-Za-z]+)['"](?:\s*,\s*['"]([A-Za-z]+)['"])?"""
        for word, sub in re.findall(pattern, path.read_text()):
            word, sub = word.lower(), sub.lower()
            used[f"{word}|{sub}" if sub and f"{word}|{sub}" in known_pairs else word] = str(path)
    allowed = set(ROLES["node"])
    missing = {}
    for command, where in sorted(used.items()):
        base = command.split("|")[0]
        if base in NOT_THE_NODES or command in allowed or base in allowed:
            continue
        if (
            "|" in command and not any(a.startswith(base + "|") for a in allowed)
        ) or "|" not in command:
            missing[command] = where
    assert not missing, missing


async def test_a_worker_under_its_role_carries_on_after_a_function_flush(
    users, own_redis_server
) -> None:
    """The worker may not load functions (no FUNCTION LOAD, no EVAL): after a FUNCTION
    FLUSH its calls are refused until a node, meeting the same, loads them all again;
    then runs go on, nothing lost."""
    node_redis = Redis(users["node"], size=8)
    worker_redis = Redis(users["worker"], size=8)
    admin = redis_py.Redis(port=own_redis_server.port)
    try:
        dep = await drive_async(ops.open_deployment(NS, 4), node_redis)
        async with trio.open_nursery() as nursery:
            await nursery.start(ShardManager(node_redis, dep, node_id="n", renew_every_s=0.5).run)
            await nursery.start(Worker(worker_redis, dep, "w", concurrency=2).run)
            once = OnceSchedule(at=from_ms(0))

            async def ran(job_id: str) -> bool:
                page = await drive_async(listing.runs_page(dep, job_id, 1), node_redis)
                return bool(page.runs) and page.runs[0].state == "succeeded"

            first = await drive_async(
                ops.create_job(dep, JobSpec(name="before", schedule=once, command="true")),
                node_redis,
            )
            await wait_until(lambda: ran(first.job_id), timeout=20)
            admin.execute_command("FUNCTION", "FLUSH")
            after = await drive_async(
                ops.create_job(dep, JobSpec(name="after", schedule=once, command="true")),
                node_redis,
            )
            await wait_until(lambda: ran(after.job_id), timeout=30)
            nursery.cancel_scope.cancel()
    finally:
        admin.close()
        await node_redis.aclose()
        await worker_redis.aclose()


async def test_a_stolen_worker_password_cannot_choose_what_a_run_executes(users) -> None:
    """The attack as reported: with the worker's Redis password, write a copy of the DAG
    with a task's command replaced and point the DAG run's version at it; or rewrite a
    run by hand's args. The copy is refused (a DAG's kept versions are the nodes'), and
    what a worker may still write (the DAG run's and the run's own hashes, which show
    them) is not what a claim reads: the run executes what the node and the API wrote."""
    from shardsched.core.models import DagSpec, TaskSpec
    from shardsched.core.params import TriggerRequest
    from shardsched.ops.dags import manage as dag_ops
    from shardsched.store.drive import redis_calls
    from shardsched.store.lua import runs as runs_lua

    node_redis = Redis(users["node"], size=4)
    worker_redis = Redis(users["worker"], size=4)
    try:
        dep = await drive_async(ops.open_deployment(NS, 4), node_redis)
        paused = IntervalSchedule(every_s=86400)
        dag = DagSpec(name="d", schedule=paused, tasks=[TaskSpec(name="a", command="echo a")])
        dag_id = (await drive_async(dag_ops.create_dag(dep, dag), node_redis)).dag_id
        opened = await drive_async(
            dag_ops.trigger_dag(dep, dag_id, "t", TriggerRequest(args={"who": "api"})),
            node_redis,
        )
        job = await drive_async(
            ops.create_job(dep, JobSpec(name="j", schedule=paused, command="echo j")), node_redis
        )
        run = await drive_async(
            ops.trigger(dep, job.job_id, "t", TriggerRequest(args={"n": 1})), node_redis
        )
        dk, jk = dep.keys_for(dag_id), dep.keys_for(job.job_id)
        drid = opened.dag_run_id
        forged = '{"name":"a","command":"echo FORGED; id"}'
        with pytest.raises(ReplyError, match=DENIED):
            await worker_redis.execute("HSET", dk.dag_version(dag_id, 9), "s:a", forged)
        with pytest.raises(ReplyError, match=DENIED):
            await worker_redis.execute("HSET", dk.dag_run_given(drid), "tv", "9")
        # what it may write, it writes, and it changes nothing that runs
        await worker_redis.execute("HSET", dk.dag_run(drid), "tv", "9", "args", '{"who":"x"}')
        await worker_redis.execute("HSET", jk.run(run.run_id), "args", '{"n":666}')
        claimed = []
        for shard in {dk.shard, jk.shard}:
            sk = dep.shard(shard)
            call = runs_lua.claim(sk, dep.globals, "w", 10)
            (reply,) = await redis_calls(worker_redis, [call])
            claimed += runs_lua.decode_claimed(reply)
        by_run = {c.run_id: c for c in claimed}
        assert run.run_id in by_run and len(by_run) == 2, by_run
        assert json.loads(by_run[run.run_id].args_json) == {"n": 1}
        (task_run,) = [c for c in claimed if c.run_id != run.run_id]
        assert b"FORGED" not in task_run.spec_json and b"echo a" in task_run.spec_json
        assert json.loads(task_run.args_json) == {"who": "api"}
    finally:
        await node_redis.aclose()
        await worker_redis.aclose()
