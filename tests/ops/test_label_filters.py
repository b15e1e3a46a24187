"""Lists filter by label (``?label=team:payments,tier:gold``): the API, the SDK's
operation and the CLI; a bad filter is a 422 naming ``$.label``."""

from __future__ import annotations

import json

from conftest import cli, drive_list
from shardsched.ops import listing

FAR = {"type": "once", "at": "2100-01-01T00:00:00Z"}


async def test_jobs_and_dags_are_listed_by_label(http, redis, dep) -> None:
    made: dict[str, str] = {}
    for name, labels in [
        ("pay-gold", {"team": "payments", "tier": "gold"}),
        ("pay", {"team": "payments"}),
        ("search", {"team": "search", "tier": "gold"}),
        ("bare", {}),
    ]:
        body = {"name": name, "command": "true", "schedule": FAR, "labels": labels}
        made[name] = (await http.post("/api/v1/jobs", json=body)).json()["job_id"]

    async def names(query: str) -> set[str]:
        reply = await http.get("/api/v1/jobs", params={"label": query, "limit": 500})
        assert reply.status_code == 200, reply.text
        return {j["name"] for j in reply.json()["jobs"]}

    assert await names("team:payments") == {"pay-gold", "pay"}
    assert await names("team:payments,tier:gold") == {"pay-gold"}
    assert await names("tier:gold") == {"pay-gold", "search"}
    assert await names("team:nobody") == set()
    # the operation the SDK's list_jobs drives
    jobs = await drive_list(listing.jobs_page(dep, 50, labels={"tier": "gold"}), redis)
    assert {j.name for j in jobs} == {"pay-gold", "search"}

    for bad in ("team", "team:a,team:b"):
        reply = await http.get("/api/v1/jobs", params={"label": bad})
        assert reply.status_code == 422, reply.text
        assert reply.json()["error"]["details"]["field"] == "$.label"

    dag = {
        "name": "etl",
        "schedule": FAR,
        "labels": {"team": "payments"},
        "tasks": [{"name": "a", "command": "true"}],
    }
    assert (await http.post("/api/v1/dags", json=dag)).status_code == 201
    dags = (await http.get("/api/v1/dags", params={"label": "team:payments"})).json()["dags"]
    assert [d["name"] for d in dags] == ["etl"]
    none = (await http.get("/api/v1/dags", params={"label": "team:search"})).json()["dags"]
    assert none == []

    api = ("--api", str(http.base_url))
    out = await cli(
        http, *api, "--json", "jobs", "list", "--label", "team=payments", "--label", "tier=gold"
    )
    assert out.returncode == 0, out.stderr
    assert [j["name"] for j in json.loads(out.stdout)["jobs"]] == ["pay-gold"]
    out = await cli(http, *api, "--json", "dags", "list", "--label", "team=payments")
    assert out.returncode == 0, out.stderr
    assert [d["name"] for d in json.loads(out.stdout)["dags"]] == ["etl"]
    bad = await cli(http, *api, "jobs", "list", "--label", "team")
    assert bad.returncode != 0 and "KEY=VALUE" in bad.stderr
