"""Webhooks reach no address a request from inside the network should never reach, follow
no redirect, say nothing of why a connection failed, and a channel's URL never comes
back with a credential in it (issue 47: 169.254.169.254, [::1]:6379 and 0x7f000001
were accepted, redirects followed, connection errors echoed; ``user:pass@`` returned).

Against real sockets on loopback: a listening receiver, a port nobody listens on, a
server that resets, one that redirects. The policy's default holds here: this module
removes the suite's own allowance of loopback (conftest) where it tests it.
"""

from __future__ import annotations

import http.server
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from shardsched.core.notify import Channel
from shardsched.core.notify_addresses import ENV, parse_networks, url_refusal
from shardsched.core.notify_views import ChannelView
from shardsched.runtime.redis_server import free_port
from shardsched.shard import channels

HOSTILE = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:6379/",
    "http://0x7f000001:6379/",
    "http://2130706433/",
    "http://127.1/",
    "http://0177.0.0.1/",
    "http://[::ffff:127.0.0.1]/",
    "http://[fe80::1]/",
    "http://0.0.0.0:8080/",
    "http://localhost:6379/",
    "http://api.localhost/",
    "http://100.100.100.200/latest/",
    "https://224.0.0.1/",
]


@pytest.fixture
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy as a node has it by default: no network allowed."""
    monkeypatch.delenv(ENV, raising=False)


@pytest.mark.parametrize("url", HOSTILE)
async def test_a_channel_to_a_refused_address_is_422_and_not_stored(strict, http, url) -> None:
    reply = await http.put(
        "/api/v1/notifications/channels/ssrf", json={"kind": "webhook", "url": url}
    )
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["details"]["field"] == "$.url"
    assert "not notified" in reply.json()["error"]["message"]
    listed = (await http.get("/api/v1/notifications/channels")).json()["channels"]
    assert listed == []


def test_public_and_private_names_and_addresses_are_allowed() -> None:
    for url in ("https://hooks.slack.com/services/T/B/X", "http://10.1.2.3/hook",
                "http://[2606:4700::1111]/", "http://ops.internal:8080/"):  # fmt: skip
        assert url_refusal(url) is None, url
    assert url_refusal("http://127.0.0.1:9/", parse_networks(["127.0.0.0/8"])) is None
    assert url_refusal("http://[::1]:9/", parse_networks(["127.0.0.0/8"])) is not None


class _Server:
    """A loopback HTTP server that answers every POST with ``status`` (and ``location``)."""

    def __init__(self, status: int, location: str = "") -> None:
        self.hits = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.hits += 1
                self.rfile.read(int(self.headers.get("content-length", 0)))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers() -> Iterator[list[_Server]]:
    made: list[_Server] = []
    yield made
    for s in made:
        s.close()


LOOPBACK = parse_networks(["127.0.0.0/8"])


def post(url: str, allowed=()) -> channels.Sent:
    return channels._post(url, b"{}", {"Content-Type": "application/json"}, 2.0, allowed)


def test_a_stored_channel_to_loopback_is_refused_when_sending(servers) -> None:
    """A channel stored before the check (or a name that resolves to loopback) is refused
    at connect time, for every address it resolves to; nothing reaches the receiver."""
    receiver = _Server(200)
    servers.append(receiver)
    sent = post(receiver.url)
    assert not sent.ok and not sent.retry and sent.answer.startswith("refused:"), sent
    assert receiver.hits == 0
    by_name = receiver.url.replace("127.0.0.1", socket.gethostname())
    if any(
        info[4][0].startswith("127.")
        for info in socket.getaddrinfo(socket.gethostname(), 80, 0, socket.SOCK_STREAM)
    ):  # this machine's name resolves to loopback (/etc/hosts): a name is checked too
        assert post(by_name).answer.startswith("refused:")
        assert receiver.hits == 0
    assert post(receiver.url, LOOPBACK).ok  # the operator allowed it
    assert receiver.hits == 1


def test_a_redirect_is_recorded_never_followed(servers) -> None:
    target = _Server(200)
    bouncer = _Server(302, location=target.url)
    servers += [target, bouncer]
    sent = post(bouncer.url, LOOPBACK)
    assert (sent.ok, sent.retry) == (False, False)
    assert sent.answer == "HTTP 302: redirects are not followed"
    assert (bouncer.hits, target.hits) == (1, 0)


def _resetting_server() -> tuple[socket.socket, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def reset_all() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=reset_all, daemon=True).start()
    return listener, listener.getsockname()[1]


def test_why_a_connection_failed_is_not_in_the_delivery_record() -> None:
    """A closed port, a server that resets and a silent one answer alike: no port scan."""
    listener, resetting = _resetting_server()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts (backlog), never answers
    try:
        answers = {
            post(f"http://127.0.0.1:{port}/", LOOPBACK).answer for port in (free_port(), resetting)
        }
        slow = channels._post(
            f"http://127.0.0.1:{silent.getsockname()[1]}/", b"{}", {}, 0.5, LOOPBACK
        )
        answers.add(slow.answer)
    finally:
        listener.close()
        silent.close()
    assert answers == {channels.UNREACHED}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pa55@hooks.example.com/x", "http://hooks.example.com/…"),
        ("https://hooks.slack.com/services/T0/B0/SECRETSECRET", "https://hooks.slack.com/…"),
        ("https://ops.example.com:8443/hook?token=abc", "https://ops.example.com:8443/…"),
        ("https://ops.example.com/", "https://ops.example.com/"),
        ("http://[2001:db8::1]:81/a", "http://[2001:db8::1]:81/…"),
    ],
)
def test_a_channels_url_comes_back_without_credentials(url: str, shown: str) -> None:
    assert ChannelView.of("c", Channel(kind="webhook", url=url)).url == shown


async def test_the_api_never_answers_a_channels_credentials(http) -> None:
    secret_urls = {
        "basic": {"kind": "webhook", "url": "http://alice:hunter2@127.0.0.1:9/h?key=k3y"},
        "apprise": {"kind": "apprise", "url": "slack://T1/B2/C3SECRET"},
    }
    for name, body in secret_urls.items():
        assert (
            await http.put(f"/api/v1/notifications/channels/{name}", json=body)
        ).status_code in (200, 201)
    text = (await http.get("/api/v1/notifications/channels")).text
    for leaked in ("alice", "hunter2", "k3y", "C3SECRET", "T1/B2"):
        assert leaked not in text, text


@pytest.mark.parametrize(
    "url",
    [
        "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "http://100.64.0.1/",
        "http://198.18.0.1/",
        "http://192.0.0.170/",
        "http://127.0.0.1./",
    ],
)
async def test_special_purpose_and_embedded_addresses_are_refused(strict, http, url) -> None:
    reply = await http.put(
        "/api/v1/notifications/channels/ssrf", json={"kind": "webhook", "url": url}
    )
    assert reply.status_code == 422, reply.text


@pytest.mark.parametrize(
    "url",
    ["https://hooks.slack.com%3Ftoken=SEKRET", "https://h.example.com%2FSEKRET/x",
     "https://h.example.com;SEKRET/", "https://\uff11\uff12\uff17.0.0.1/"],
)  # fmt: skip
async def test_a_host_that_is_no_name_is_422(http, url) -> None:
    reply = await http.put(
        "/api/v1/notifications/channels/bad", json={"kind": "webhook", "url": url}
    )
    assert reply.status_code == 422, reply.text
    assert "SEKRET" not in (await http.get("/api/v1/notifications/channels")).text


def test_a_service_that_greets_first_is_no_oracle() -> None:
    """A port whose service speaks first (SMTP, SSH, Redis-like) once put its banner in
    the delivery record ("BadStatusLine: 220 mail.internal ESMTP …"): now it reads as any
    port that is no HTTP receiver."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def greet() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(b"220 mail.internal ESMTP Postfix SECRET-VERSION\r\n")
            conn.close()

    threading.Thread(target=greet, daemon=True).start()
    try:
        sent = post(f"http://127.0.0.1:{listener.getsockname()[1]}/", LOOPBACK)
    finally:
        listener.close()
    assert sent.answer == channels.UNREACHED, sent


def test_an_apprise_name_that_resolves_to_loopback_is_refused(strict) -> None:
    pytest.importorskip("apprise")
    sent = channels._apprise("json://localhost:9/", "t", "x")
    assert sent.answer.startswith("refused:") and not sent.retry, sent
    name = socket.gethostname()
    if any(i[4][0].startswith("127.") for i in socket.getaddrinfo(name, 80)):
        assert channels._apprise(f"json://{name}:9/", "t", "x").answer.startswith("refused:")
