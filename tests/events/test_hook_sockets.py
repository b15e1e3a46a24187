"""A hook over raw sockets, as a careless or hostile sender speaks HTTP/1.1: a body
shorter than its Content-Length then a half-close, a chunked body, a body dripped
slowly, two requests pipelined on one connection, a bare LF. Each gets an answer (or
the connection closes) and writes nothing it should not: only a whole, well-signed
body becomes an event, and the node keeps answering."""

from __future__ import annotations

import hashlib
import hmac
import socket
import time

import trio

from conftest import keyspace

SECRET = "raw-socket-secret-0123456789"


def sign(body: bytes) -> str:
    t = int(time.time())
    mac = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def exchange(port: int, raw: bytes, half_close: bool = False, drip: float = 0.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        if drip:
            for i in range(0, len(raw), 7):
                s.sendall(raw[i : i + 7])
                time.sleep(drip)  # a slow sender, on purpose
        else:
            s.sendall(raw)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out and (b"connection: close" in out.lower() or half_close):
                    continue
                if out.count(b"HTTP/1.1 ") >= raw.count(b"POST ") and b"\r\n\r\n" in out:
                    head, _, body = out.partition(b"\r\n\r\n")
                    length = [
                        int(line.split(b":")[1]) for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ]  # fmt: skip
                    if length and len(body) >= length[-1] and raw.count(b"POST ") == 1:
                        break
        except TimeoutError:
            pass
        return out


def request(body: bytes, signature: str, extra: bytes = b"", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    return (
        b"POST /api/v1/hooks/raw HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Shardsched-Signature: {signature}\r\n".encode()
        + b"content-type: application/json\r\n"
        + f"content-length: {size}\r\n".encode()
        + extra
        + b"\r\n"
        + body
    )


async def test_a_hook_over_raw_sockets(http, node, redis, namespace) -> None:
    await http.put("/api/v1/hooks/raw", json={"secrets": [SECRET]})
    job = {"name": "raw", "command": "true", "on": [{"event": "hook.raw"}]}
    assert (await http.post("/api/v1/jobs", json=job)).status_code == 201
    port = int(str(http.base_url).rstrip("/").rsplit(":", 1)[1])
    body = b'{"n": 1}'
    before = await keyspace(redis, namespace)

    def hostile() -> list[bytes]:
        answers = []
        # shorter than its Content-Length, then half-closed: the signature is over what came
        answers.append(exchange(port, request(body[:4], sign(body), length=len(body)), True))
        # chunked: the whole body arrives; but signed over other bytes, it is refused
        chunked = (
            b"POST /api/v1/hooks/raw HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Shardsched-Signature: {sign(b'{}')}\r\n".encode()
            + b"transfer-encoding: chunked\r\n\r\n"
            + f"{len(body):x}\r\n".encode()
            + body
            + b"\r\n0\r\n\r\n"
        )
        answers.append(exchange(port, chunked))
        return answers

    answers = await trio.to_thread.run_sync(hostile)
    assert b"HTTP/1.1 201" not in b"".join(answers) and b"HTTP/1.1 200" not in b"".join(answers)
    assert answers[0].startswith(b"HTTP/1.1 400") and answers[1].startswith(b"HTTP/1.1 401")
    assert b'www-authenticate: Shardsched-Signature realm="hook"' in answers[1]
    assert await keyspace(redis, namespace) == before  # nothing written

    def good() -> list[bytes]:
        dripped = exchange(port, request(body, sign(body)), drip=0.01)
        two = request(b'{"n": 2}', sign(b'{"n": 2}')) + request(b'{"n": 3}', sign(b'{"n": 3}'))
        # bare LFs for CRLFs: HTTP/1.1's parser takes them (RFC 9112 2.2); the body is as signed
        lf = request(b'{"n": 4}', sign(b'{"n": 4}')).replace(b"\r\n", b"\n")
        return [dripped, exchange(port, two, half_close=True), exchange(port, lf, True)]

    dripped, pipelined, lf = await trio.to_thread.run_sync(good)
    assert dripped.startswith(b"HTTP/1.1 200"), dripped
    assert pipelined.count(b"HTTP/1.1 200") == 2, pipelined
    assert lf.startswith(b"HTTP/1.1 200"), lf
    page = (await http.get("/api/v1/events/received")).json()["events"]
    assert sorted(e["payload"]["n"] for e in page) == [1, 2, 3, 4]
    assert all(e["outcome"]["outcome"] == "runs" for e in page)
