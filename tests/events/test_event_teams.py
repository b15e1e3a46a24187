"""Teams stay apart through events and `after` rules (found by the independent tester):
a team's job may run after its own only, another team's upstream refused exactly as an
unknown one is; an event a team emits is answered with its own jobs' deliveries only."""

from __future__ import annotations

import httpx

from shardsched.core.access import Scope, TokenRequest
from shardsched.ops.access import tokens
from shardsched.store.drive import drive_async


async def team(redis, dep, http, name: str, prefix: str) -> httpx.AsyncClient:
    request = TokenRequest(name=name, scopes=[Scope.WRITE], prefixes=[prefix])
    made = await drive_async(tokens.create_token(dep, request, "tests"), redis)
    headers = {"authorization": f"Bearer {made.token}"}
    return httpx.AsyncClient(base_url=str(http.base_url), timeout=10, headers=headers)


async def test_teams_stay_apart(http, node, redis, dep) -> None:
    a = await team(redis, dep, http, "team-a", "a-")
    b = await team(redis, dep, http, "team-b", "b-")
    async with a, b:
        every = {"type": "interval", "every_s": 3600}
        made = await b.put("/api/v1/jobs/b-src", json={"name": "b-src", "command": "true",
                                                      "schedule": every})  # fmt: skip
        assert made.status_code == 201
        for upstream in ("job:b-src", "job:b-nope"):  # another team's, and an unknown one
            job = {"name": "a-after", "command": "true", "on": [{"after": upstream}]}
            reply = await a.put("/api/v1/jobs/a-after", json=job)
            assert reply.status_code == 422, reply.text
            assert reply.json()["error"]["message"] == (
                f"{upstream}: there is no such job, task or DAG to run after"
            )
        job = {"name": "a-sel", "command": "true", "on": [{"after": "labels:team=b"}]}
        reply = await a.put("/api/v1/jobs/a-sel", json=job)
        assert reply.status_code == 422 and "by id, not by labels" in reply.text
        await a.put("/api/v1/jobs/a-l", json={"name": "a-l", "command": "true",
                                              "on": [{"event": "shared"}]})  # fmt: skip
        await b.put("/api/v1/jobs/b-l", json={"name": "b-l", "command": "true",
                                              "on": [{"event": "shared"}]})  # fmt: skip
        seen_by_a = (await a.post("/api/v1/events/shared", json={})).json()
        assert [d["job_id"] for d in seen_by_a["outcome"]["deliveries"]] == ["a-l"]
        everything = (await http.get(f"/api/v1/events/{seen_by_a['event_id']}")).json()
        assert sorted(d["job_id"] for d in everything["outcome"]["deliveries"]) == ["a-l", "b-l"]
        assert (await a.get(f"/api/v1/events/{seen_by_a['event_id']}")).status_code == 403
