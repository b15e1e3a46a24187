"""The console's session and pages, as an attacker and a browser use them: the login form
(its double-submit value, a wrong token, hostile bodies), the cookie's attributes, a
change made with the cookie needs the CSRF value and writes nothing without it, log out,
assets by name only; and ten live tabs cost Redis what one does (one event-stream read
per interval for every stream of a process)."""

from __future__ import annotations

import re

import httpx
import pytest
import trio

from conftest import keyspace
from shardsched.router.session import csrf_of
from workers import command_calls


def _cookie(resp: httpx.Response, name: str) -> str:
    for value in resp.headers.get_list("set-cookie"):
        if value.startswith(name + "="):
            return value
    raise AssertionError(f"no {name} cookie in {resp.headers.get_list('set-cookie')}")


def _nonce(page: str) -> str:
    match = re.search(r'name="nonce" value="([^"]+)"', page)
    assert match, page
    return match.group(1)


async def _login(http: httpx.AsyncClient) -> httpx.AsyncClient:
    """A browser-like client logged in through the form (its own cookie jar)."""
    token = http.headers["authorization"].removeprefix("Bearer ")
    c = httpx.AsyncClient(base_url=http.base_url, timeout=10)
    page = await c.get("/ui/login")
    nonce = _nonce(page.text)
    resp = await c.post("/ui/login", data={"nonce": nonce, "token": token})
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/"
    assert resp.headers["cache-control"] == "no-store"  # it sets the session: never cached
    return c


async def test_pages_redirect_and_the_login_sets_a_strict_httponly_cookie(http) -> None:
    async with httpx.AsyncClient(base_url=http.base_url) as anon:
        assert (await anon.get("/")).headers["location"] == "/ui/"
        resp = await anon.get("/ui/")
        assert resp.status_code == 303 and resp.headers["location"] == "/ui/login"
        page = await anon.get("/ui/login")
        assert (
            page.status_code == 200
            and "default-src 'self'" in page.headers["content-security-policy"]
        )
        login = _cookie(page, "shardsched_login")
        assert "HttpOnly" in login and "SameSite=Strict" in login
        nonce = _nonce(page.text)
        token = http.headers["authorization"].removeprefix("Bearer ")
        # without the form's own value (a cross-site form): refused, no session
        resp = await anon.post("/ui/login", data={"nonce": "forged", "token": token})
        assert resp.status_code == 403 and "shardsched_session" not in str(resp.headers)
        nonce = _nonce(resp.text)  # each form shown carries a value of its own
        resp = await anon.post("/ui/login", data={"nonce": nonce, "token": "wrong"})
        assert resp.status_code == 401 and "Unknown or revoked token" in resp.text
        resp = await anon.post("/ui/login", data={"nonce": _nonce(resp.text), "token": token})
        session = _cookie(resp, "shardsched_session")
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attr in session
        assert (await anon.get("/ui/")).status_code == 200


async def test_a_change_by_cookie_needs_the_csrf_value(http, redis, dep) -> None:
    c = await _login(http)
    try:
        assert (await c.get("/api/v1/jobs")).status_code == 200
        me = (await c.get("/ui/session")).json()
        assert me["name"] == "test-admin" and me["csrf"]
        body = {
            "name": "by-cookie",
            "command": "true",
            "schedule": {"type": "interval", "every_s": 60},
        }
        before = await keyspace(redis, dep.namespace)
        for headers in ({}, {"x-csrf-token": "0" * 40}, {"x-csrf-token": csrf_of("other")}):
            resp = await c.post("/api/v1/jobs", json=body, headers=headers)
            assert resp.status_code == 403 and resp.json()["error"]["code"] == "csrf"
        assert await keyspace(redis, dep.namespace) == before
        resp = await c.post("/api/v1/jobs", json=body, headers={"x-csrf-token": me["csrf"]})
        assert resp.status_code == 201, resp.text
        # another site's page: its Origin is refused before anything else
        resp = await c.post(
            "/api/v1/jobs", json=body,
            headers={"x-csrf-token": me["csrf"], "origin": "http://evil.example"},
        )  # fmt: skip
        assert resp.status_code == 403
        # log out: only with the value; then the cookie is cleared
        assert (await c.post("/ui/logout", data={"csrf": "x"})).status_code == 403
        resp = await c.post("/ui/logout", data={"csrf": me["csrf"]})
        assert resp.status_code == 303 and "Max-Age=0" in _cookie(resp, "shardsched_session")
        assert (await c.get("/ui/session")).status_code == 401
    finally:
        await c.aclose()


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/json", b'{"token": "x"}', 415),
        ("application/x-www-form-urlencoded", b"token=" + b"a" * 5000, 413),
        ("application/x-www-form-urlencoded", b"token=\xff\xfe", 400),
        ("application/x-www-form-urlencoded", b"nonce=%00&token=%00", 403),
    ],
)
async def test_hostile_login_bodies_get_a_clear_answer(http, content_type, body, status) -> None:
    async with httpx.AsyncClient(base_url=http.base_url) as anon:
        resp = await anon.post("/ui/login", content=body, headers={"content-type": content_type})
        assert resp.status_code == status, resp.text
        assert (await anon.get("/ui/login")).status_code == 200  # the server is fine


@pytest.mark.parametrize("name", ["index.html", "..%2F..%2Fpyproject.toml", "login.html", "x.js"])
async def test_only_the_named_assets_are_served(http, name) -> None:
    assert (await http.get(f"/ui/assets/{name}")).status_code == 404
    assert (await http.get("/ui/assets/app.js")).status_code == 200


async def _xrange_calls(redis) -> int:
    return await command_calls(redis, "xrange")


async def _streams(http: httpx.AsyncClient, n: int, seconds: float, redis) -> int:
    """XRANGE calls Redis served while ``n`` event streams were open for ``seconds``."""
    opened = trio.Semaphore(0)
    done = trio.Event()

    async def tab() -> None:
        # each tab ends by itself (not cancelled from outside), so its response closes
        # in full: a socket left half-closed would surface later as a ResourceWarning
        async with http.stream("GET", "/api/v1/events/stream") as resp:
            assert resp.status_code == 200
            opened.release()
            async with trio.open_nursery() as reading:

                async def read() -> None:
                    async for _ in resp.aiter_raw():
                        pass

                reading.start_soon(read)
                await done.wait()
                reading.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(tab)
        for _ in range(n):
            await opened.acquire()
        await trio.sleep(0.5)  # every stream past its own start-up read
        before = await _xrange_calls(redis)
        await trio.sleep(seconds)  # the measured window: the streams poll, nothing else runs
        after = await _xrange_calls(redis)
        done.set()
    return after - before


@pytest.mark.slow  # moved out of the default run to keep it under 8 min
async def test_ten_live_tabs_cost_redis_what_one_does(http, redis, dep) -> None:
    one = await _streams(http, 1, 3.0, redis)
    ten = await _streams(http, 10, 3.0, redis)
    print(f"XRANGE calls in 3 s: one stream {one}, ten streams {ten}")
    assert one > 0
    assert ten <= one * 1.5 + dep.n_shards, (one, ten)
