"""The HTTP client's transport, as a service behind a load balancer treats it: a 503 with
``Retry-After`` is waited out for a call that may be sent twice and never resent for one
that may not; an unreachable API is ``Unreachable``; the token comes from the argument,
the environment or the CLI's profile; ``https://`` trusts the CA file it is given; the
async client runs under asyncio and trio alike. A real HTTP server on loopback plays the
API (its answers scripted), and a real node answers the end-to-end ones."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import wait_until
from shardsched import (
    AsyncClient,
    Client,
    IntervalSchedule,
    JobSpec,
    RedisUnavailable,
    Unauthenticated,
    Unreachable,
)
from shardsched.core.calendars import CalendarList
from shardsched.core.errors import ConfigError

EMPTY = json.dumps({"calendars": []}).encode()
TRIGGERED = json.dumps({"run_id": "job_1:t1:1", "scheduled_for": "2026-12-06T00:00:00Z"}).encode()


class Scripted(http.server.ThreadingHTTPServer):
    """Answers each request with the next of ``script`` (status, headers, body; ``None``:
    close the connection without answering), noting what it was sent."""

    def __init__(self, script: list) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script, self.seen = list(script), []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        server: Scripted = self.server  # type: ignore[assignment]
        headers = {k.lower(): v for k, v in self.headers.items()}
        server.seen.append((self.command, self.path, headers, body, time.monotonic()))
        step = server.script.pop(0) if len(server.script) > 1 else server.script[0]
        if step is None:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status, headers, payload = step
        self.send_response(status)
        for name, value in {"content-type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _answer


@pytest.fixture
def serve() -> Iterator:
    servers: list[Scripted] = []

    def start(script: list, tls: tuple[Path, Path] | None = None) -> Scripted:
        server = Scripted(script)
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*tls)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def busy(retry_after: str = "0.2") -> tuple:
    error = {"error": {"code": "redis_unavailable", "message": "BUSY", "details": None}}
    return 503, {"retry-after": retry_after}, json.dumps(error).encode()


def test_a_503_is_waited_out_as_retry_after_asks_for_a_call_that_may_be_resent(serve) -> None:
    api = serve([busy(), busy(), (200, {}, EMPTY)])
    with Client(api.url, token="t") as client:
        assert client.list_calendars() == CalendarList(calendars=[])
    times = [seen[4] for seen in api.seen]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.19 and times[2] - times[1] >= 0.19  # Retry-After: 0.2


def test_a_call_that_may_not_be_resent_is_sent_once(serve) -> None:
    api = serve([busy(), (200, {}, TRIGGERED)])
    with Client(api.url, token="t") as client, pytest.raises(RedisUnavailable):
        client.trigger("job_1")
    assert len(api.seen) == 1
    # with an idempotency key the service answers a resend with the first run: resent
    api.script[:] = [busy("0"), (200, {}, TRIGGERED)]
    with Client(api.url, token="t") as client:
        assert client.trigger("job_1", idempotency_key="k").run_id == "job_1:t1:1"
    assert len(api.seen) == 3


def test_a_connection_broken_after_sending_resends_only_what_may_be_resent(serve) -> None:
    api = serve([None, (200, {}, EMPTY)])
    with Client(api.url, token="t") as client:
        assert client.list_calendars().calendars == []
    assert len(api.seen) == 2
    api.script[:] = [None, (200, {}, TRIGGERED)]
    with Client(api.url, token="t") as client, pytest.raises(Unreachable):
        client.trigger("job_1")
    assert len(api.seen) == 3


def test_an_api_that_cannot_be_reached_is_unreachable_after_the_retries() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"http://127.0.0.1:{port}", token="t", retries=2) as client:
        started = time.monotonic()
        with pytest.raises(Unreachable, match="cannot reach the API"):
            client.get_job("job_1")
        assert time.monotonic() - started < 5
    with pytest.raises(Unreachable, match="cannot reach Redis"):
        Client(f"redis://127.0.0.1:{port}/0")


def test_the_token_comes_from_the_argument_the_environment_or_the_profile(
    serve, tmp_path, monkeypatch
) -> None:
    api = serve([(200, {}, EMPTY)])
    token_file = tmp_path / "prod.token"
    token_file.write_text("from-profile\n")
    config = tmp_path / "config.toml"
    config.write_text(
        f'profile = "prod"\n[profiles.prod]\napi = "{api.url}"\ntoken_file = "{token_file}"\n'
    )
    monkeypatch.setenv("SHARDSCHED_CONFIG", str(config))
    monkeypatch.delenv("SHARDSCHED_TOKEN", raising=False)
    monkeypatch.chdir(tmp_path)  # no .shardsched/token here
    with Client() as client:  # the profile's API and token
        client.list_calendars()
    monkeypatch.setenv("SHARDSCHED_TOKEN", "from-env")
    with Client(api.url) as client:
        client.list_calendars()
    with Client(api.url, token="from-argument") as client:
        client.list_calendars()
    sent = [seen[2].get("authorization") for seen in api.seen]
    assert sent == ["Bearer from-profile", "Bearer from-env", "Bearer from-argument"]


def test_https_trusts_the_ca_file_it_is_given(serve, cert, tmp_path) -> None:
    api = serve([(200, {}, EMPTY)], tls=cert)
    url = api.url.replace("http://127.0.0.1", "https://localhost")
    with Client(url, token="t", ca_file=str(cert[0])) as client:
        assert client.list_calendars().calendars == []
    with Client(url, token="t") as client:
        started = time.monotonic()
        with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY"):
            client.list_calendars()  # not a CA the system trusts: not tried again
        assert time.monotonic() - started < 2
    with pytest.raises(ConfigError, match="cannot use the CA file"):
        Client(url, token="t", ca_file=str(tmp_path / "nope.pem"))


def test_a_token_url_or_wait_that_cannot_work_is_said_at_once() -> None:
    from shardsched.sdk.http.calls import HttpCall
    from shardsched.sdk.http.transport import RETRY_BUDGET_S, Options, pause_after

    with Client("http://127.0.0.1:9/api/v1", token="sst_x\n") as client:  # as a file ends
        assert client.options.endpoint.token == "sst_x"
        assert client.options.endpoint.url == "http://127.0.0.1:9"  # as dev prints it
        assert "sst_x" not in repr(client.options)  # a token in a log is a token leaked
    for token in ("", "a\r\nb", "sst_é"):
        with pytest.raises(ValueError, match="a token is printable ASCII"):
            Client("http://127.0.0.1:9", token=token)
    with pytest.raises(ValueError, match="no user or password"):
        Client("http://u:p@127.0.0.1:9", token="t")
    with pytest.raises(TypeError, match="for the HTTP API"):
        Client("ftp://127.0.0.1:9", token="t")
    # a proxy's Retry-After of a day is waited 10 s at most, and no pause passes the budget
    options = Options.of("http://127.0.0.1:9", "t", None, None, None, 4, None)
    call = HttpCall("GET", "/api/v1/calendars", CalendarList)
    import httpx

    answer = httpx.Response(503, headers={"retry-after": "100000"})
    assert pause_after(options, call, 1, answer, 0.0) == 10.0
    assert pause_after(options, call, 1, answer, RETRY_BUDGET_S - 5) is None


def test_the_async_client_runs_under_asyncio(serve) -> None:
    api = serve([busy("0"), (200, {}, EMPTY)])

    async def main() -> CalendarList:
        async with await AsyncClient.open(api.url, token="t") as client:
            return await client.list_calendars()

    assert asyncio.run(main()).calendars == []
    assert len(api.seen) == 2


async def test_the_async_client_under_trio_against_a_node(node, worker, http) -> None:
    token = http.headers["authorization"].removeprefix("Bearer ")
    url = str(http.base_url)
    async with await AsyncClient.open(url, token=token) as client:
        specs = [
            JobSpec(name=f"async-http-{i}", schedule=IntervalSchedule(every_s=60), command="true")
            for i in range(5)
        ]
        created = await client.add_jobs(specs)
        names = [
            job.name
            async for job in client.each(client.list_jobs, limit=2, name_prefix="async-http-")
        ]
        assert sorted(names) == sorted(s.name for s in specs)
        run = await client.trigger(created[0].job_id)

        async def succeeded() -> bool:
            return (await client.get_run(run.run_id)).state == "succeeded"

        await wait_until(succeeded, timeout=20)
    async with await AsyncClient.open(url, token="not-a-token") as client:
        with pytest.raises(Unauthenticated):
            await client.get_job(created[0].job_id)
