"""Test helper: a RESP proxy in front of a real redis-server that answers chosen commands
with the error replies Redis gives when it serves nothing (BUSY, LOADING, MASTERDOWN) or
refuses one command (NOPERM, READONLY, OOM), without forwarding them: the server never
sees a refused command, as with the real thing. Every other command, and every reply,
passes through unchanged and in order, pipelines included, so a process behind it sees
exactly what Redis would send it. It knows nothing of shardsched: it reads RESP.

A connection that subscribes (pub/sub pushes are not one reply a command) or blocks for
MONITOR becomes a plain pipe from then on. Handshake commands (AUTH, HELLO, SELECT, and
FUNCTION LOAD at connect) are never refused, so a process can always connect.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field

import trio

ERRORS = {
    "BUSY": b"-BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
    b"SHUTDOWN NOSAVE.\r\n",
    "LOADING": b"-LOADING Redis is loading the dataset in memory\r\n",
    "NOPERM": b"-NOPERM User default has no permissions to run this command\r\n",
    "READONLY": b"-READONLY You can't write against a read only replica.\r\n",
    "OOM": b"-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    "MASTERDOWN": b"-MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
    b"set to 'no'.\r\n",
}
HANDSHAKE = frozenset({b"AUTH", b"HELLO", b"SELECT", b"SCRIPT", b"FUNCTION", b"CLIENT", b"QUIT"})
PIPE_AFTER = frozenset({b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE", b"MONITOR"})


def reply_end(buf: bytes | bytearray, pos: int = 0) -> int | None:
    """Where the RESP2 value starting at ``pos`` ends, or None when it is not all there."""
    line = buf.find(b"\r\n", pos)
    if line < 0:
        return None
    kind, head = buf[pos : pos + 1], buf[pos + 1 : line]
    after = line + 2
    if kind in (b"+", b"-", b":"):
        return after
    if kind == b"$":
        n = int(head)
        if n < 0:
            return after
        return after + n + 2 if len(buf) >= after + n + 2 else None
    if kind == b"*":
        n = int(head)
        for _ in range(max(n, 0)):
            end = reply_end(buf, after)
            if end is None:
                return None
            after = end
        return after
    raise ValueError(f"not RESP2: {bytes(buf[pos : pos + 20])!r}")


def command_name(buf: bytes | bytearray, pos: int) -> bytes:
    """The first word of the RESP array (a command) at ``pos``."""
    first = buf.find(b"\r\n", pos) + 2
    size_end = buf.find(b"\r\n", first)
    n = int(buf[first + 1 : size_end])
    return bytes(buf[size_end + 2 : size_end + 2 + n]).upper()


@dataclass
class FaultProxy:
    """Listens on a loopback port; forwards to ``upstream_port``. Set ``errors`` (names of
    :data:`ERRORS`) and ``rate`` (the share of commands refused) while it runs."""

    upstream_port: int
    errors: tuple[str, ...] = ()
    rate: float = 0.0
    seed: int = 47
    port: int = 0
    injected: Counter[str] = field(default_factory=Counter)  #: by error, then by command
    by_command: Counter[bytes] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._open: set[trio.SocketStream] = set()

    def url(self, password: str | None = None) -> str:
        auth = f":{password}@" if password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        try:
            await trio.serve_listeners(self._handle, listeners)
        finally:  # cancelled with the test: nothing of it left open
            for stream in self._open:
                stream.socket.close()

    def _refusal(self, name: bytes) -> bytes | None:
        if not self.errors or name in HANDSHAKE or self._rng.random() >= self.rate:
            return None
        error = self._rng.choice(self.errors)
        self.injected[error] += 1
        self.by_command[name] += 1
        return ERRORS[error]

    async def _handle(self, client: trio.SocketStream) -> None:
        self._open.add(client)
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream_port)
        except OSError:
            await client.aclose()
            return
        self._open.add(upstream)
        order_send, order_receive = trio.open_memory_channel[bytes | None](math.inf)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._requests, client, upstream, order_send, nursery)
                nursery.start_soon(self._replies, client, upstream, order_receive, nursery)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError, ValueError):
            pass
        finally:
            await trio.aclose_forcefully(client)
            await trio.aclose_forcefully(upstream)

    async def _requests(self, client, upstream, order, nursery) -> None:
        """Client to server: each command forwarded (order gets None) or refused (order
        gets its error reply); after a SUBSCRIBE, everything as it comes (order gets b"")."""
        buf = bytearray()
        piped = False
        while data := await client.receive_some(65536):
            if piped:
                await upstream.send_all(data)
                continue
            buf += data
            out = bytearray()
            pos = 0
            while (end := reply_end(buf, pos)) is not None:
                name = command_name(buf, pos)
                refusal = None if name in PIPE_AFTER else self._refusal(name)
                if refusal is None:
                    out += buf[pos:end]
                    order.send_nowait(None)
                else:
                    order.send_nowait(refusal)
                pos = end
                if name in PIPE_AFTER:
                    out += buf[pos:]
                    pos = len(buf)
                    order.send_nowait(b"")
                    piped = True
                    break
            del buf[:pos]
            if out:
                await upstream.send_all(bytes(out))
        nursery.cancel_scope.cancel()

    async def _replies(self, client, upstream, order, nursery) -> None:
        """Server to client, in the order of the commands: a refused command's error in its
        place, every forwarded command's reply as the server sent it."""
        buf = bytearray()
        async for slot in order:
            if slot == b"":  # a pipe from now on
                if buf:
                    await client.send_all(bytes(buf))
                while data := await upstream.receive_some(65536):
                    await client.send_all(data)
                break
            if slot is not None:
                await client.send_all(slot)
                continue
            while (end := reply_end(buf)) is None:
                data = await upstream.receive_some(65536)
                if not data:
                    nursery.cancel_scope.cancel()
                    return
                buf += data
            await client.send_all(bytes(buf[:end]))
            del buf[:end]
        nursery.cancel_scope.cancel()
