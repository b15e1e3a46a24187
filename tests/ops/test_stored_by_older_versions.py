"""A definition stored by an older version that fails a check added since (a NUL byte in
a command became a 422 after such commands were stored) stays listable, flagged, and
deletable; one such job once made ``GET /jobs`` a 422 for everyone and could be neither
read, changed nor deleted through the API."""

from __future__ import annotations

import json

import msgspec

from conftest import wait_until

JOB = {"command": "true", "schedule": {"type": "interval", "every_s": 3600}}


async def _stored_before_the_check(http, redis, dep, **bad) -> str:
    made = await http.post("/api/v1/jobs", json={"name": "old", **JOB})
    job_id = made.json()["job_id"]
    key = dep.keys_for(job_id).job(job_id)
    spec = msgspec.json.decode(await redis.execute("HGET", key, "spec"))
    await redis.execute("HSET", key, "spec", json.dumps({**spec, **bad}))
    return job_id


async def test_a_job_stored_with_a_nul_is_listed_flagged_and_deletable(
    node, http, redis, dep
) -> None:
    fine = (await http.post("/api/v1/jobs", json={"name": "fine", **JOB})).json()["job_id"]
    old = await _stored_before_the_check(http, redis, dep, command="echo a\x00b")
    listed = await http.get("/api/v1/jobs")
    assert listed.status_code == 200, listed.text
    by_id = {j["job_id"]: j for j in listed.json()["jobs"]}
    assert by_id[fine].get("invalid") is None
    assert by_id[old]["invalid"].startswith("$.command: ")
    assert "\x00" not in listed.text and "\\u0000" not in listed.text  # shown repaired
    read = await http.get(f"/api/v1/jobs/{old}")
    assert read.status_code == 200 and read.json()["invalid"], read.text
    patched = await http.patch(f"/api/v1/jobs/{old}", json={"timeout_s": 60})
    assert patched.status_code == 409, patched.text
    assert "replace it whole (PUT) or delete it" in patched.json()["error"]["message"]
    replaced = await http.put(f"/api/v1/jobs/{old}", json={"name": "old", **JOB})
    assert replaced.status_code == 200, replaced.text
    assert (await http.get(f"/api/v1/jobs/{old}")).json().get("invalid") is None


async def test_a_flagged_job_can_be_deleted(node, http, redis, dep) -> None:
    old = await _stored_before_the_check(
        http, redis, dep, command="x\x00", name="bell\x07", labels={"bad key!": "v"}
    )
    shown = (await http.get(f"/api/v1/jobs/{old}")).json()
    assert shown["name"] == "bell" and shown["labels"] == {} and shown["invalid"]
    deleted = await http.delete(f"/api/v1/jobs/{old}")
    assert deleted.status_code in (200, 204), deleted.text

    async def gone() -> bool:
        listed = (await http.get("/api/v1/jobs")).json()["jobs"]
        return all(j["job_id"] != old for j in listed)

    await wait_until(gone, timeout=5)
