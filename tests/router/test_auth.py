"""The API as an attacker meets it: no token, a bad token, the wrong scope, another team's
ids, a revoked token, a foreign Host or Origin, a body that is not JSON. Every rejection
has the error shape and leaves the keyspace as it was."""

from __future__ import annotations

import base64
import re
import subprocess

import httpx
import pytest
import trio

from conftest import child_env, keyspace, shardsched_cmd, wait_until
from shardsched.core.access import Scope, TokenRequest, token_hash
from shardsched.core.errors import ConfigError
from shardsched.ops.access import tokens
from shardsched.router.app import create_app
from shardsched.router.guards import AccessPolicy
from shardsched.router.routes import OPERATIONS
from shardsched.service import serve_http
from shardsched.store.drive import drive_async

EVERY_HOUR = {"type": "interval", "every_s": 3600}


async def serve(nursery, redis, dep, policy: AccessPolicy | None = None) -> str:
    binds = await nursery.start(serve_http, create_app(redis, dep, policy=policy), "127.0.0.1:0")
    return binds[0]


async def token(redis, dep, name: str, *scopes: Scope, prefixes: tuple[str, ...] = ()) -> str:
    request = TokenRequest(name=name, scopes=list(scopes), prefixes=list(prefixes))
    return str((await drive_async(tokens.create_token(dep, request, "test"), redis)).token)


def client(base: str, secret: str | None = None) -> httpx.AsyncClient:
    headers = {} if secret is None else {"authorization": f"Bearer {secret}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=10)


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


@pytest.fixture
async def base(nursery, redis, dep) -> str:
    return await serve(nursery, redis, dep)


async def test_every_gated_route_wants_a_token_and_changes_nothing_without(
    base, redis, dep
) -> None:
    """401 with the error shape and a WWW-Authenticate challenge, on every route that has
    a scope: none is forgotten, as the route table is what the app is built from."""
    admin = await token(redis, dep, "admin", Scope.ADMIN)
    async with client(base, admin) as ok:
        job = await ok.post(
            "/api/v1/jobs", json={"name": "j", "command": "true", "schedule": EVERY_HOUR}
        )
        assert job.status_code == 201
    before = await keyspace(redis, dep.namespace)
    gated = [op for op in OPERATIONS if op.needed() is not None]
    assert len(gated) >= 30
    for secret in (None, "sst_not-a-real-token", admin + "x"):
        async with client(base, secret) as anon:
            for op in gated:
                body = {} if op.body is not None else None
                reply = await anon.request(op.method.upper(), concrete(op.path), json=body)
                assert reply.status_code == 401, (op.method, op.path, reply.text)
                assert reply.json()["error"]["code"] == "unauthorized"
                assert reply.headers["www-authenticate"].startswith("Bearer")
    assert await keyspace(redis, dep.namespace) == before


async def test_open_routes_stay_open_and_metrics_can_be_closed(nursery, base, redis, dep) -> None:
    async with client(base) as anon:
        assert (await anon.get("/healthz")).status_code == 200
        assert (await anon.get("/readyz")).status_code in (200, 503)
        assert (await anon.get("/metrics")).status_code == 200
        assert (await anon.get("/openapi.json")).status_code == 200
    closed = await serve(nursery, redis, dep, AccessPolicy(metrics_auth=True))
    reader = await token(redis, dep, "reader", Scope.READ)
    async with client(closed) as anon, client(closed, reader) as ok:
        assert (await anon.get("/metrics")).status_code == 401
        assert (await ok.get("/metrics")).status_code == 200


async def test_scopes(base, redis, dep) -> None:
    secrets = {
        s: await token(redis, dep, s.value, s) for s in (Scope.READ, Scope.WRITE, Scope.WORKER)
    }
    secrets[Scope.ADMIN] = await token(redis, dep, "admin", Scope.ADMIN)
    job = {"name": "j", "command": "true", "schedule": EVERY_HOUR}
    claim = {"worker_id": "worker-1", "max_runs": 1}  # the worker token acts as its own
    async with client(base, secrets[Scope.WRITE]) as writer:
        job_id = (await writer.post("/api/v1/jobs", json=job)).json()["job_id"]
    before = await keyspace(redis, dep.namespace)
    refused = [
        (Scope.READ, "POST", "/api/v1/jobs", job),
        (Scope.READ, "DELETE", f"/api/v1/jobs/{job_id}", None),
        (Scope.READ, "POST", f"/api/v1/jobs/{job_id}/trigger", None),
        (Scope.WRITE, "POST", "/api/v1/tokens", {"name": "x", "scopes": ["admin"]}),
        (Scope.WRITE, "GET", "/api/v1/tokens", None),
        (Scope.WRITE, "POST", "/internal/runs/claim", claim),
        (Scope.WORKER, "GET", "/api/v1/jobs", None),
        (Scope.WORKER, "GET", f"/api/v1/jobs/{job_id}", None),
        (Scope.WORKER, "POST", f"/api/v1/jobs/{job_id}/trigger", None),
        (Scope.ADMIN, "POST", "/internal/runs/claim", claim),  # admin is not a worker
    ]
    for scope, method, path, body in refused:
        async with client(base, secrets[scope]) as c:
            reply = await c.request(method, path, json=body)
        assert reply.status_code == 403, (scope, method, path, reply.text)
        assert reply.json()["error"]["code"] == "forbidden"
    assert await keyspace(redis, dep.namespace) == before
    allowed = [
        (Scope.READ, "GET", f"/api/v1/jobs/{job_id}", None),
        (Scope.READ, "POST", "/api/v1/schedules/preview", {"schedule": EVERY_HOUR}),
        (Scope.WRITE, "GET", "/api/v1/jobs", None),
        (Scope.ADMIN, "GET", "/api/v1/tokens", None),
        (Scope.ADMIN, "POST", f"/api/v1/jobs/{job_id}/trigger", None),
        (Scope.WORKER, "POST", "/internal/runs/claim", claim),
    ]
    for scope, method, path, body in allowed:
        async with client(base, secrets[scope]) as c:
            reply = await c.request(method, path, json=body)
        assert reply.status_code < 300, (scope, method, path, reply.text)


async def test_a_team_sees_and_touches_only_its_own(base, redis, dep, node, worker) -> None:
    """Team B meets team A's ids exactly as ids that do not exist: 404, the same body."""
    a = await token(redis, dep, "team-a", Scope.WRITE, prefixes=("a-",))
    b = await token(redis, dep, "team-b", Scope.WRITE, prefixes=("b-",))
    once = {"type": "once", "at": "2020-01-01T00:00:00Z"}
    retry_once = {"retry_policy": {"max_attempts": 2, "base_s": 0, "jitter": False}}
    dag = {"name": "a-etl", "schedule": EVERY_HOUR, "tasks": [{"name": "t", "command": "true"}]}
    async with client(base, a) as ta, client(base, b) as tb:
        job_id = (
            await ta.post(
                "/api/v1/jobs", json={"name": "a-job", "command": "false", "schedule": EVERY_HOUR}
            )
        ).json()["job_id"]
        once_id = (
            await ta.post(
                "/api/v1/jobs",
                json={"name": "a-once", "command": "false", "schedule": once, **retry_once},
            )
        ).json()["job_id"]
        dag_id = (await ta.post("/api/v1/dags", json=dag)).json()["dag_id"]
        run_id = (await ta.post(f"/api/v1/jobs/{job_id}/trigger")).json()["run_id"]
        dag_run = (await ta.post(f"/api/v1/dags/{dag_id}/trigger")).json()["dag_run_id"]
        b_job = (
            await tb.post(
                "/api/v1/jobs", json={"name": "b-job", "command": "true", "schedule": EVERY_HOUR}
            )
        ).json()["job_id"]

        async def settled() -> bool:
            """a-once fails twice: dead letter; and everything else has settled, so the
            keyspace stands still"""
            dead = (await ta.get("/api/v1/dead-letter")).json()["runs"]
            run = (await ta.get(f"/api/v1/runs/{run_id}")).json()
            dag = (await ta.get(f"/api/v1/dag-runs/{dag_run}")).json()
            return bool(dead) and run["state"] == "failed" and dag["state"] == "succeeded"

        await wait_until(settled, timeout=15)

        # creating or renaming outside its prefixes: 403 (the name is the caller's own)
        bad = await tb.post(
            "/api/v1/jobs", json={"name": "a-sneaky", "command": "true", "schedule": EVERY_HOUR}
        )
        assert bad.status_code == 403, bad.text
        assert (await ta.patch(f"/api/v1/jobs/{job_id}", json={"name": "b-x"})).status_code == 403
        assert (await tb.post("/api/v1/dags", json=dag)).status_code == 403

        before = await keyspace(redis, dep.namespace)
        probes = [
            ("GET", f"/api/v1/jobs/{job_id}", None),
            ("PATCH", f"/api/v1/jobs/{job_id}", {"status": "paused"}),
            ("DELETE", f"/api/v1/jobs/{job_id}", None),
            ("POST", f"/api/v1/jobs/{job_id}/trigger", None),
            ("GET", f"/api/v1/jobs/{job_id}/runs", None),
            ("GET", f"/api/v1/jobs/{job_id}/versions", None),
            ("GET", f"/api/v1/jobs/{job_id}/changes", None),
            ("GET", f"/api/v1/dags/{dag_id}/changes", None),
            ("GET", f"/api/v1/jobs/{job_id}/ticks", None),
            (
                "POST",
                f"/api/v1/jobs/{job_id}/backfill",
                {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
            ),
            ("GET", f"/api/v1/runs/{run_id}", None),
            ("GET", f"/api/v1/runs/{run_id}/output", None),
            ("POST", f"/api/v1/runs/{run_id}/retry", None),
            ("GET", f"/api/v1/dags/{dag_id}", None),
            ("PATCH", f"/api/v1/dags/{dag_id}", {"status": "paused"}),
            ("DELETE", f"/api/v1/dags/{dag_id}", None),
            ("POST", f"/api/v1/dags/{dag_id}/trigger", None),
            ("GET", f"/api/v1/dags/{dag_id}/runs", None),
            ("GET", f"/api/v1/dag-runs/{dag_run}", None),
        ]
        # reaching A's DAG through depends_on, or taking A's ids by PUT: the 404 of an
        # unknown id (a PUT on an unknown id would create it, so no twin request here)
        takes = [
            (
                "POST",
                "/api/v1/jobs",
                {"name": "b-dep", "command": "true", "depends_on": [f"{dag_id}.t"]},
            ),
            ("PUT", f"/api/v1/jobs/{job_id}", {"name": "b-x", "command": "true",
                                               "schedule": EVERY_HOUR}),
            ("PUT", f"/api/v1/dags/{dag_id}", {**dag, "name": "b-etl"}),
            ("PATCH", f"/api/v1/jobs/{b_job}", {"depends_on": [f"{dag_id}.t"]}),
        ]  # fmt: skip
        for method, path, body in takes:
            theirs = await tb.request(method, path, json=body)
            assert theirs.status_code == 404, (method, path, theirs.text)
            assert theirs.json()["error"]["code"] == "not_found", theirs.text
        for method, path, body in probes:
            theirs = await tb.request(method, path, json=body)
            missing = await tb.request(
                method, path.replace("job_", "job_0").replace("dag_", "dag_0"), json=body
            )
            assert theirs.status_code == 404, (method, path, theirs.text)
            assert theirs.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
        assert await keyspace(redis, dep.namespace) == before

        names = [j["name"] for j in (await tb.get("/api/v1/jobs")).json()["jobs"]]
        assert names == ["b-job"]
        assert (await tb.get("/api/v1/dags")).json()["dags"] == []
        assert (await tb.get("/api/v1/dead-letter")).json()["runs"] == []
        assert [
            r["run_id"].split(":")[0] for r in (await ta.get("/api/v1/dead-letter")).json()["runs"]
        ] == [once_id]
        assert sorted(j["name"] for j in (await ta.get("/api/v1/jobs")).json()["jobs"]) == [
            "a-job",
            "a-once",
        ]
        assert (await ta.get(f"/api/v1/jobs/{job_id}")).status_code == 200
        for path in ("/api/v1/status", "/api/v1/status/lag", "/api/v1/cluster", "/api/v1/workers"):
            assert (await tb.get(path)).status_code == 403, path


async def test_a_revoked_token_is_refused_by_every_router_on_its_next_request(
    nursery, redis, dep
) -> None:
    one, two = await serve(nursery, redis, dep), await serve(nursery, redis, dep)
    admin = await token(redis, dep, "admin", Scope.ADMIN)
    async with client(one, admin) as a1:
        made = await a1.post("/api/v1/tokens", json={"name": "ci", "scopes": ["read"]})
        assert made.status_code == 201, made.text
        secret = made.json()["token"]
        async with client(one, secret) as c1, client(two, secret) as c2:
            assert (await c1.get("/api/v1/jobs")).status_code == 200
            assert (await c2.get("/api/v1/jobs")).status_code == 200
            assert (await a1.delete("/api/v1/tokens/ci")).status_code == 200
            assert (await c1.get("/api/v1/jobs")).status_code == 401
            assert (await c2.get("/api/v1/jobs")).status_code == 401
        assert (await a1.delete("/api/v1/tokens/ci")).status_code == 404
        listed = (await a1.get("/api/v1/tokens")).json()["tokens"]
        assert [t["name"] for t in listed] == ["admin"]


async def test_tokens_are_random_and_redis_keeps_only_their_hash(base, redis, dep) -> None:
    admin = await token(redis, dep, "admin", Scope.ADMIN)
    async with client(base, admin) as c:
        made = (await c.post("/api/v1/tokens", json={"name": "t1", "scopes": ["read"]})).json()
        again = await c.post("/api/v1/tokens", json={"name": "t1", "scopes": ["read"]})
        assert again.status_code == 409
        bad = await c.post("/api/v1/tokens", json={"name": "t 2", "scopes": ["root"]})
        assert bad.status_code == 422
        listed = (await c.get("/api/v1/tokens")).text
    secret = made["token"]
    assert len(base64.urlsafe_b64decode(secret.removeprefix("sst_") + "=")) * 8 >= 128
    dumped = b"".join(k + v for k, v in (await keyspace(redis, dep.namespace)).items())
    assert secret.encode() not in dumped and admin.encode() not in dumped
    assert secret not in listed and token_hash(secret) not in listed


async def test_host_origin_and_content_type(nursery, base, redis, dep) -> None:
    admin = await token(redis, dep, "admin", Scope.ADMIN)
    job = {"name": "j", "command": "true", "schedule": EVERY_HOUR}
    before = await keyspace(redis, dep.namespace)
    async with client(base, admin) as c:
        rebound = await c.post("/api/v1/jobs", json=job, headers={"host": "evil.example:80"})
        assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"
        foreign = await c.post("/api/v1/jobs", json=job, headers={"origin": "https://evil.example"})
        assert foreign.status_code == 403, foreign.text
        assert foreign.json()["error"]["code"] == "origin_not_allowed"
        form = await c.post(
            "/api/v1/jobs",
            content=b'{"name":"j","command":"true"}',
            headers={"content-type": "text/plain"},
        )
        assert form.status_code == 415 and form.json()["error"]["code"] == "unsupported_media_type"
        assert await keyspace(redis, dep.namespace) == before
        own = await c.post("/api/v1/jobs", json=job, headers={"origin": base})
        assert own.status_code == 201, own.text
    allowed = await serve(
        nursery, redis, dep, AccessPolicy(allowed_origins=("https://ops.example",))
    )
    async with client(allowed, admin) as c:
        ok = await c.get("/api/v1/jobs", headers={"origin": "https://ops.example"})
        assert ok.status_code == 200


async def test_no_auth_only_on_loopback(nursery, redis, dep) -> None:
    with pytest.raises(ConfigError):
        AccessPolicy.for_bind("0.0.0.0", insecure_no_auth=True)
    with pytest.raises(ConfigError):
        AccessPolicy.for_bind("192.0.2.1", insecure_no_auth=True)
    assert not AccessPolicy.for_bind("::1", insecure_no_auth=True).auth
    assert not AccessPolicy.for_bind("0.0.0.0").loopback_hosts  # any Host once exposed
    open_api = await serve(
        nursery, redis, dep, AccessPolicy.for_bind("127.0.0.1", insecure_no_auth=True)
    )
    async with client(open_api) as anon:
        assert (
            await anon.post(
                "/api/v1/jobs", json={"name": "j", "command": "true", "schedule": EVERY_HOUR}
            )
        ).status_code == 201
    out = subprocess.run(
        shardsched_cmd(
            "node", "--redis", "redis://127.0.0.1:1/0", "--http", "0.0.0.0:0", "--insecure-no-auth"
        ),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert out.returncode == 2 and "non-loopback" in out.stderr, out.stderr


def _cli(args: list[str], cwd, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in child_env().items() if not k.startswith("SHARDSCHED_")}
    return subprocess.run(
        shardsched_cmd(*args),
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, "HOME": str(cwd), **env},
        timeout=60,
    )


async def test_the_cli_finds_its_token(base, redis, dep, tmp_path) -> None:
    """SHARDSCHED_TOKEN, a token file, the config file (api and token_file), then
    .shardsched/token in the current directory; none: a one-line 401 and exit 1."""
    secret = await token(redis, dep, "cli", Scope.READ)
    listing = ["jobs", "list", "--json"]

    def run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return _cli(args, tmp_path, **env)

    none = await trio.to_thread.run_sync(lambda: run([*listing, "--api", base]))
    assert none.returncode == 1 and "unauthorized" in none.stderr
    assert len(none.stderr.strip().splitlines()) == 1
    by_env = await trio.to_thread.run_sync(
        lambda: run([*listing, "--api", base], SHARDSCHED_TOKEN=secret)
    )
    assert by_env.returncode == 0, by_env.stderr
    (tmp_path / "tok").write_text(secret + "\n")
    by_file = await trio.to_thread.run_sync(
        lambda: run([*listing, "--api", base, "--token-file", str(tmp_path / "tok")])
    )
    assert by_file.returncode == 0, by_file.stderr
    config = tmp_path / "conf.toml"
    config.write_text(f'api = "{base}"\ntoken_file = "{tmp_path / "tok"}"\n')
    by_config = await trio.to_thread.run_sync(lambda: run(listing, SHARDSCHED_CONFIG=str(config)))
    assert by_config.returncode == 0, by_config.stderr
    (tmp_path / ".shardsched").mkdir()
    (tmp_path / ".shardsched" / "token").write_text(secret)
    by_dev_dir = await trio.to_thread.run_sync(lambda: run([*listing, "--api", base]))
    assert by_dev_dir.returncode == 0, by_dev_dir.stderr


async def test_token_acts_are_logged_and_a_token_goes_by_its_hash_too(base, redis, dep) -> None:
    """Making and revoking tokens is in the token log with who did it; a token written
    straight into Redis (no name entry) is still found and revoked, by name or by hash."""
    admin = await token(redis, dep, "root-admin", Scope.ADMIN)
    async with client(base, admin) as c:
        made = (await c.post("/api/v1/tokens", json={"name": "ci", "scopes": ["read"]})).json()
        secret = made["token"]
        assert (await c.delete(f"/api/v1/tokens/{token_hash(secret)}")).status_code == 200
        async with client(base, secret) as gone:
            assert (await gone.get("/api/v1/jobs")).status_code == 401
        # a record planted in Redis by hand, without its n:<name> entry
        planted = "sst_planted-secret-planted-secret"
        record = (
            b'{"name":"rogue","scopes":["admin"],"prefixes":[],"created_at":1,"created_by":"?"}'
        )
        await redis.execute("HSET", dep.globals.tokens, "h:" + token_hash(planted), record)
        async with client(base, planted) as rogue:
            assert (await rogue.get("/api/v1/jobs")).status_code == 200
            assert (await c.delete("/api/v1/tokens/rogue")).status_code == 200
            assert (await rogue.get("/api/v1/jobs")).status_code == 401
        assert (await c.delete("/api/v1/tokens/rogue")).status_code == 404
        log = (await c.get("/api/v1/tokens/log")).json()["acts"]
    seen = [(a["action"], a["name"], a["by"]) for a in log]
    assert seen[:3] == [
        ("revoked", "rogue", "root-admin"),
        ("revoked", "ci", "root-admin"),
        ("created", "ci", "root-admin"),
    ], seen
    assert log[1]["detail"] == "by hash" and log[2]["detail"] == "read"


async def test_notification_routes_refuse_every_scope_below_theirs(base, redis, dep) -> None:
    """A channel holds a webhook's secret and decides where messages go: every route of
    notifications is for admin tokens only (Alertmanager's hook: write). Read, write and
    worker tokens are refused 403 on each, on a real channel and rule, and change nothing."""
    admin = await token(redis, dep, "admin", Scope.ADMIN)
    channel = {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "s3cret"}
    async with client(base, admin) as ok:
        made = await ok.put("/api/v1/notifications/channels/ops", json=channel)
        assert made.status_code == 201, made.text
        rule = await ok.post(
            "/api/v1/notifications/rules", json={"events": ["failed"], "channels": ["ops"]}
        )
        assert rule.status_code == 201, rule.text
    names = {"name": "ops", "rule_id": rule.json()["id"], "msg_id": "m1"}
    lower = {
        s: await token(redis, dep, s.value, s) for s in (Scope.READ, Scope.WRITE, Scope.WORKER)
    }
    before = await keyspace(redis, dep.namespace)
    ops_ = [op for op in OPERATIONS if op.path.startswith("/api/v1/notifications/")]
    assert len(ops_) >= 10
    tried = 0
    for op in ops_:
        path = re.sub(r"\{([^}]+)\}", lambda m: names[m.group(1)], op.path)
        body = {"events": ["failed"], "channels": ["ops"]} if op.body is not None else None
        for scope, secret in lower.items():
            if op.needed() == Scope.WRITE and scope == Scope.WRITE:
                continue  # the alerts hook is the write scope's
            async with client(base, secret) as c:
                reply = await c.request(op.method.upper(), path, json=body)
            assert reply.status_code == 403, (scope, op.method, path, reply.text)
            assert reply.json()["error"]["code"] == "forbidden"
            assert "s3cret" not in reply.text
            tried += 1
    assert tried >= 30
    assert await keyspace(redis, dep.namespace) == before


async def test_calendar_writes_refuse_read_worker_and_team_tokens(base, redis, dep) -> None:
    """A calendar decides the ticks of every job naming it: a read or worker token may not
    put or delete one, nor a write token bound to a team (it is not the team's); reading
    them is a read token's. Nothing changes on a refusal."""
    admin = await token(redis, dep, "admin", Scope.ADMIN)
    async with client(base, admin) as ok:
        made = await ok.put("/api/v1/calendars/holidays", json={"dates": ["2026-12-25"]})
        assert made.status_code == 201, made.text
    weak = {
        "read": await token(redis, dep, "r", Scope.READ),
        "worker": await token(redis, dep, "w", Scope.WORKER),
        "team": await token(redis, dep, "t", Scope.WRITE, prefixes=("team-a-",)),
    }
    before = await keyspace(redis, dep.namespace)
    for who, secret in weak.items():
        async with client(base, secret) as c:
            for method, body in (("PUT", {"dates": []}), ("DELETE", None)):
                reply = await c.request(method, "/api/v1/calendars/holidays", json=body)
                assert reply.status_code == 403, (who, method, reply.text)
                assert reply.json()["error"]["code"] == "forbidden"
    assert await keyspace(redis, dep.namespace) == before
    async with client(base, weak["read"]) as c:
        listed = (await c.get("/api/v1/calendars")).json()["calendars"]
        assert [x["name"] for x in listed] == ["holidays"]


async def test_a_team_uses_and_sees_only_its_own_concurrency_keys(base, redis, dep, node) -> None:
    """Team A's job with ``concurrency_key: b-db`` and ``concurrency_limit: 1`` starved
    team B's runs; every token read every key. A team's keys start with its prefix, as its
    names do: another's is a 403 naming the field, and nothing is written; a team lists
    and reads its own keys alone (another's reads as an unused key)."""
    a = await token(redis, dep, "team-a", Scope.WRITE, prefixes=("a-",))
    b = await token(redis, dep, "team-b", Scope.WRITE, prefixes=("b-",))
    admin = await token(redis, dep, "ops", Scope.ADMIN)
    job = {"command": "true", "schedule": EVERY_HOUR}
    async with client(base, a) as ta, client(base, b) as tb, client(base, admin) as ops:
        made = await tb.post(
            "/api/v1/jobs", json={"name": "b-load", "concurrency_key": "b-db", **job}
        )
        assert made.status_code == 201, made.text
        assert (await ops.put("/api/v1/concurrency/b-db", json={"limit": 3})).status_code == 200
        before = await keyspace(redis, dep.namespace)
        dag = {"name": "a-etl", "schedule": EVERY_HOUR,
               "tasks": [{"name": "t", "command": "true", "concurrency_key": "b-db"}]}  # fmt: skip
        for method, path, body, field in (
            ("post", "/api/v1/jobs", {"name": "a-x", "concurrency_key": "b-db",
                                      "concurrency_limit": 1, **job}, "$.concurrency_key"),
            ("put", "/api/v1/jobs/a-y", {"name": "a-y", "concurrency_key": "{labels.t}",
                                         "labels": {"t": "b-db"}, **job}, "$.concurrency_key"),
            ("post", "/api/v1/dags", dag, "$.tasks[0].concurrency_key"),
        ):  # fmt: skip
            reply = await ta.request(method, path, json=body)
            assert reply.status_code == 403, (path, reply.text)
            assert field in reply.json()["error"]["message"]
        assert await keyspace(redis, dep.namespace) == before
        own = await ta.post("/api/v1/jobs", json={"name": "a-x", "concurrency_key": "a-db", **job})
        assert own.status_code == 201, own.text
        job_id = own.json()["job_id"]
        moved = await ta.patch(f"/api/v1/jobs/{job_id}", json={"concurrency_key": "b-db"})
        assert moved.status_code == 403, moved.text
        assert (await ops.put("/api/v1/concurrency/a-db", json={"limit": 2})).status_code == 200
        keys_a = {k["key"] for k in (await ta.get("/api/v1/concurrency")).json()["keys"]}
        keys_b = {k["key"] for k in (await tb.get("/api/v1/concurrency")).json()["keys"]}
        keys_all = {k["key"] for k in (await ops.get("/api/v1/concurrency")).json()["keys"]}
        assert (keys_a, keys_b) == ({"a-db"}, {"b-db"}) and {"a-db", "b-db"} <= keys_all
        theirs = (await ta.get("/api/v1/concurrency/b-db")).json()
        unused = (await ta.get("/api/v1/concurrency/a-nothing")).json()
        assert theirs == {**unused, "key": "b-db"} and theirs["limit"] is None
        assert (await tb.get("/api/v1/concurrency/b-db")).json()["limit"] == 3
        # setting a key's limits is an admin's: a team's write token may not
        assert (await ta.put("/api/v1/concurrency/a-db", json={"limit": 9})).status_code == 403
