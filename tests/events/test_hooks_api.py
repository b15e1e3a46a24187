"""Signed hooks: ``POST /api/v1/hooks/{name}`` with no token, its body signed with
HMAC-SHA256 over ``<t>.<body>``. The signature is computed here by hand (hmac over the
documented message), not by the service's own ``sign``: a reading shared with the code
would hide a mistake in both. Unsigned, badly signed, stale, oversized and non-JSON
requests are refused and write nothing; two secrets are good during a rotation; a
hook's secret appears in no answer; its key comes from a header, a field, or the
signature."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import httpx
import trio

from conftest import keyspace

SECRET = "s3cret-for-tests-0001"
OTHER = "another-secret-0002xx"


def signed(body: bytes, secret: str = SECRET, at: int | None = None) -> dict[str, str]:
    t = int(time.time()) if at is None else at
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Shardsched-Signature": f"t={t},v1={mac}", "content-type": "application/json"}


async def setup(http: httpx.AsyncClient, **hook) -> str:
    spec = {"secrets": [SECRET], **hook}
    reply = await http.put("/api/v1/hooks/cms", json=spec)
    assert reply.status_code == 201, reply.text  # made (200: replaced)
    job = {"name": "fed", "command": "true", "on": [{"event": "hook.cms"}]}
    return (await http.post("/api/v1/jobs", json=job)).json()["job_id"]


def anonymous(http: httpx.AsyncClient) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=str(http.base_url), timeout=10)


async def test_a_signed_request_runs_the_job_with_its_payload(http, node) -> None:
    job_id = await setup(http)
    body = json.dumps({"post": {"slug": "a"}}).encode()
    async with anonymous(http) as anon:
        reply = await anon.post("/api/v1/hooks/cms", content=body, headers=signed(body))
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert set(answer) == {"event_id", "outcome"} and answer["outcome"] == "runs"
    event = (await http.get(f"/api/v1/events/{answer['event_id']}")).json()
    assert event["source"] == "hook:cms" and event["name"] == "hook.cms"
    (d,) = event["outcome"]["deliveries"]
    run = (await http.get(f"/api/v1/runs/{d['run_id']}")).json()
    assert d["job_id"] == job_id and run["args"] == {"post": {"slug": "a"}}


async def test_refused_requests_write_nothing(http, node, redis, namespace) -> None:
    await setup(http)
    body = b'{"a": 1}'
    good = signed(body)
    before = await keyspace(redis, namespace)
    cases = [
        ({}, body, 401, "bad_signature"),  # unsigned
        (signed(body, OTHER), body, 401, "bad_signature"),  # another secret
        (good, b'{"a": 2}', 401, "bad_signature"),  # the body changed
        (signed(body, at=int(time.time()) - 301), body, 401, "stale_signature"),
        (signed(body, at=int(time.time()) + 400), body, 401, "stale_signature"),
        ({"Shardsched-Signature": "t=abc,v1=00"}, body, 401, "bad_signature"),
        ({"Shardsched-Signature": "garbage"}, body, 401, "bad_signature"),
        ({"Shardsched-Signature": "t=1,v1=\u00e9".encode("latin-1")}, body, 401, "bad_signature"),
        (signed(b"not json"), b"not json", 422, "validation_error"),
        (signed(b"\xff\xfe"), b"\xff\xfe", 422, "validation_error"),
    ]
    big = json.dumps({"x": "a" * 70_000}).encode()
    cases.append((signed(big), big, 413, "body_too_large"))
    async with anonymous(http) as anon:
        for headers, sent, status, code in cases:
            reply = await anon.post("/api/v1/hooks/cms", content=sent, headers=headers)
            assert reply.status_code == status, (headers, reply.text)
            assert reply.json()["error"]["code"] == code, reply.text
            assert SECRET not in reply.text
        reply = await anon.post("/api/v1/hooks/nope", content=body, headers=good)
        assert reply.status_code == 404
        # a hook's management wants an admin token
        assert (await anon.get("/api/v1/hooks/cms")).status_code == 401
    assert await keyspace(redis, namespace) == before


async def test_two_secrets_during_a_rotation(http, node) -> None:
    await setup(http, secrets=[SECRET, OTHER])
    body = b"{}"
    async with anonymous(http) as anon:
        for secret in (SECRET, OTHER):
            reply = await anon.post("/api/v1/hooks/cms", content=body, headers=signed(body, secret))
            assert reply.status_code == 200, reply.text
        await http.put("/api/v1/hooks/cms", json={"secrets": [OTHER]})  # rotation done
        reply = await anon.post("/api/v1/hooks/cms", content=body, headers=signed(body, SECRET))
        assert reply.status_code == 401


async def test_no_answer_shows_a_secret(http, node) -> None:
    await setup(http, secrets=[SECRET, OTHER], idempotency_header="X-Delivery")
    for path in ("/api/v1/hooks", "/api/v1/hooks/cms", "/openapi.json"):
        reply = await http.get(path)
        assert SECRET not in reply.text and OTHER not in reply.text
    hook = (await http.get("/api/v1/hooks/cms")).json()
    assert hook == {
        "name": "cms",
        "event": "hook.cms",
        "secrets": 2,
        "url_path": "/api/v1/hooks/cms",
        "idempotency_header": "X-Delivery",
    }


async def test_keys_from_a_header_a_field_or_the_signature(http, node) -> None:
    await setup(http, idempotency_header="X-Delivery")
    body = b'{"id": "p1"}'
    async with anonymous(http) as anon:

        async def send(headers: dict) -> dict:
            reply = await anon.post("/api/v1/hooks/cms", content=body, headers=headers)
            assert reply.status_code == 200, reply.text
            return reply.json()

        first = await send({**signed(body), "X-Delivery": "d-1"})
        # the sender retries a minute later: signed anew, the same delivery id
        again = await send({**signed(body, at=int(time.time()) + 60), "X-Delivery": "d-1"})
        assert (first["outcome"], again["outcome"]) == ("runs", "deduplicated")
        reply = await anon.post("/api/v1/hooks/cms", content=body, headers=signed(body))
        assert reply.status_code == 422  # no key where the hook says it is
        await http.put("/api/v1/hooks/cms", json={"secrets": [SECRET], "idempotency_field": "id"})
        a = await send(signed(body))
        b = await send(signed(body, at=int(time.time()) - 30))
        assert (a["outcome"], b["outcome"]) == ("runs", "deduplicated")
        await http.put("/api/v1/hooks/cms", json={"secrets": [SECRET]})
        t = int(time.time())  # one instant for both: a second ticking between them made
        headers = signed(body, at=t)  # "now - 1" the first one's t, a resend (CI, once)
        c, d = await send(headers), await send(headers)  # the same request resent
        assert (c["outcome"], d["outcome"]) == ("runs", "deduplicated")
        e = await send(signed(body, at=t - 1))
        assert e["outcome"] == "runs"  # signed anew: another request, without a key


async def test_a_deleted_hook_refuses(http, node) -> None:
    await setup(http)
    assert (await http.delete("/api/v1/hooks/cms")).json()["name"] == "cms"
    body = b"{}"
    async with anonymous(http) as anon:
        reply = await anon.post("/api/v1/hooks/cms", content=body, headers=signed(body))
    assert reply.status_code == 404
    assert (await http.delete("/api/v1/hooks/cms")).status_code == 404
    bad = await http.put("/api/v1/hooks/cms", json={"secrets": ["short"]})
    assert bad.status_code == 422
    bad = await http.put("/api/v1/hooks/x!", json={"secrets": [SECRET]})
    assert bad.status_code == 422


async def test_found_by_the_tester(http, node, redis, namespace) -> None:
    """A body nested past 64 levels is 422 before anything is written (it was stored, and
    then broke every read of the events: a RecursionError); a request resent with its
    signature header written otherwise (pairs reordered, spaces, another v1=) is still
    the same request when the signature is the key; ``t`` is signed as its very digits."""
    await setup(http)
    deep = b'{"a":' * 980 + b"1" + b"}" * 980
    before = await keyspace(redis, namespace)
    async with anonymous(http) as anon:
        reply = await anon.post("/api/v1/hooks/cms", content=deep, headers=signed(deep))
        assert reply.status_code == 422 and "deeper than 64" in reply.text, reply.text
        assert await keyspace(redis, namespace) == before
        body = b'{"n": 1}'
        headers = signed(body)
        t, v1 = headers["Shardsched-Signature"].split(",")
        first = await anon.post("/api/v1/hooks/cms", content=body, headers=headers)
        assert first.json()["outcome"] == "runs"
        for written in (f"{v1},{t}", f"{t}, {v1}", f"{t},{v1},v1=00", f"{t},v1=00,{v1}"):
            resent = {**headers, "Shardsched-Signature": written}
            again = await anon.post("/api/v1/hooks/cms", content=body, headers=resent)
            assert again.json()["outcome"] == "deduplicated", (written, again.text)
        now = int(time.time())
        mac = hmac.new(SECRET.encode(), f"0{now}.".encode() + body, hashlib.sha256).hexdigest()
        padded = {**headers, "Shardsched-Signature": f"t=0{now},v1={mac}"}
        assert (
            await anon.post("/api/v1/hooks/cms", content=body, headers=padded)
        ).status_code == 200
        mac = hmac.new(SECRET.encode(), f"{now}.".encode() + body, hashlib.sha256).hexdigest()
        padded = {**headers, "Shardsched-Signature": f"t=0{now},v1={mac}"}
        assert (
            await anon.post("/api/v1/hooks/cms", content=body, headers=padded)
        ).status_code == 401


async def test_more_found_by_the_tester(http, node, redis_server, dep) -> None:
    """Every refusal of a hook request is counted by its code; a hook takes its key from
    a header or a field, not both; an emitted payload with NaN is refused (it was stored
    as null); a replaced hook answers 200, a new one 201."""
    from shardsched import Client, ValidationError

    await setup(http)
    replaced = await http.put("/api/v1/hooks/cms", json={"secrets": [SECRET]})
    assert replaced.status_code == 200
    both = {"secrets": [SECRET], "idempotency_header": "X-Id", "idempotency_field": "id"}
    reply = await http.put("/api/v1/hooks/cms", json=both)
    assert reply.status_code == 422 and "not both" in reply.text
    async with anonymous(http) as anon:
        await anon.post("/api/v1/hooks/cms", content=b"x" * 70_000, headers=signed(b"x"))
        await anon.post("/api/v1/hooks/cms", content=b"nope", headers=signed(b"nope"))
        await anon.post("/api/v1/hooks/none", content=b"{}", headers=signed(b"{}"))
        await anon.post("/api/v1/hooks/cms", content=b"{}", headers={})
    # the app's own metrics: the router's registry, which the http fixture's app keeps
    text = (await http.get("/metrics")).text
    for code in ("body_too_large", "validation_error", "not_found", "bad_signature"):
        assert f'shardsched_hook_requests_refused_total{{reason="{code}"}} 1.0' in text, code

    def nan() -> str:
        with Client(redis_server.url, dep.namespace) as client:
            try:
                client.emit("x", {"v": float("nan")})
            except ValidationError as exc:
                return str(exc)
        return "accepted"

    assert "not a JSON number" in await trio.to_thread.run_sync(nan)
