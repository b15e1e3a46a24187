"""``/api/v1/concurrency``: set, read, clear a key's limits through the API, the CLI and
the SDK alike; bad input is a 422 that writes nothing; a read-only token cannot set one;
every change is in the key's log."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from conftest import admin_token, child_env, keyspace, shardsched_cmd
from shardsched.core.access import Scope, TokenRequest
from shardsched.ops.access import tokens
from shardsched.store.drive import drive_async


async def test_set_read_and_clear_a_keys_limits(http, redis, dep) -> None:
    resp = await http.put(
        "/api/v1/concurrency/tenant:acme", json={"limit": 3, "rate": {"max": 10, "per_s": 60}}
    )
    assert resp.status_code == 200, resp.text
    view = resp.json()
    assert view["key"] == "tenant:acme" and view["limit"] == 3
    assert view["rate"] == {"max": 10, "per_s": 60.0}
    assert view["running"] == 0 and view["waiting"] == 0
    assert view["changes"][0]["actor"] == "test-admin" and view["changes"][0]["limit"] == 3

    resp = await http.put("/api/v1/concurrency/tenant:acme", json={"limit": 5})
    assert resp.json()["limit"] == 5 and resp.json()["rate"] is None  # left out: cleared
    listed = (await http.get("/api/v1/concurrency")).json()["keys"]
    assert [k["key"] for k in listed] == ["tenant:acme"]

    resp = await http.delete("/api/v1/concurrency/tenant:acme")
    assert resp.status_code == 200 and resp.json()["limit"] is None
    changes = resp.json()["changes"]
    assert [c.get("limit") for c in changes] == [None, 5, 3] and changes[0]["cleared"]
    assert (await http.get("/api/v1/concurrency")).json()["keys"] == []
    resp = await http.delete("/api/v1/concurrency/tenant:acme")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/concurrency/k", {"limit": 0}, "$.limit"),
        ("/api/v1/concurrency/k", {"limit": "three"}, "$.limit"),
        ("/api/v1/concurrency/k", {"rate": {"max": 1, "per_s": 0}}, "$.rate.per_s"),
        ("/api/v1/concurrency/k", {"rate": {"max": 1}}, "$.rate.per_s"),
        ("/api/v1/concurrency/k", {"limits": 3}, "$.limits"),
        ("/api/v1/concurrency/%7Bk%7D", {"limit": 1}, "key"),
        ("/api/v1/concurrency/" + "k" * 129, {"limit": 1}, "key"),
        ("/api/v1/concurrency/a%20b", {"limit": 1}, "key"),
    ],
)
async def test_bad_input_is_422_and_writes_nothing(http, redis, dep, path, body, field) -> None:
    before = await keyspace(redis, dep.namespace)
    resp = await http.put(path, json=body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["details"]["field"] == field
    assert await keyspace(redis, dep.namespace) == before


async def test_a_read_only_token_reads_but_cannot_set(http, redis, dep) -> None:
    made = await drive_async(
        tokens.create_token(dep, TokenRequest(name="ro", scopes=[Scope.READ]), "t"), redis
    )
    headers = {"authorization": f"Bearer {made.token}"}
    async with httpx.AsyncClient(base_url=str(http.base_url), headers=headers) as ro:
        assert (await ro.get("/api/v1/concurrency")).status_code == 200
        resp = await ro.put("/api/v1/concurrency/k", json={"limit": 1})
        assert resp.status_code == 403


async def test_the_cli_sets_and_shows_a_key(http, redis, dep, tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(await admin_token(redis, dep, "cli"))
    base = ["--api", str(http.base_url), "--token-file", str(token_file)]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = shardsched_cmd("concurrency", *args[:1], *base, *args[1:])
        return subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=60)

    import trio

    done = await trio.to_thread.run_sync(
        lambda: cli("set", "db-pool", "--limit", "2", "--rate", "5/1.5")
    )
    assert done.returncode == 0, done.stderr
    assert "db-pool" in done.stdout and "5/1.5s" in done.stdout
    shown = await trio.to_thread.run_sync(lambda: cli("get", "db-pool"))
    assert shown.returncode == 0 and "cli" in shown.stdout  # who changed it
    bad = await trio.to_thread.run_sync(lambda: cli("set", "db-pool", "--rate", "often"))
    assert bad.returncode != 0 and "STARTS/SECONDS" in bad.stderr
    none = await trio.to_thread.run_sync(lambda: cli("set", "db-pool"))
    assert none.returncode == 1 and "--limit" in none.stderr
    listed = await trio.to_thread.run_sync(lambda: cli("list", "--json"))
    assert listed.returncode == 0 and '"db-pool"' in listed.stdout


def test_the_sdk_sets_and_reads_a_key(redis_server, namespace) -> None:
    from shardsched.core.errors import ValidationError
    from shardsched.sdk import Client

    with Client(redis_server.url, namespace) as client:
        view = client.set_concurrency_limits("sdk-key", limit=4, rate=(2, 1.0))
        assert view.limit == 4 and view.rate is not None and view.rate.max == 2
        assert client.get_concurrency_key("sdk-key").limit == 4
        assert [k.key for k in client.list_concurrency_keys().keys] == ["sdk-key"]
        with pytest.raises(ValidationError):
            client.set_concurrency_limits("sdk-key", limit=0)
        with pytest.raises(ValidationError):
            client.set_concurrency_limits("no spaces please", limit=1)
        assert client.clear_concurrency_limits("sdk-key").limit is None
