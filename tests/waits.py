"""Waits on what the components expose, not on a timer.

- :func:`wait_until` checks a predicate over the store once, then again after each write
  the test's redis-servers report (keyspace notifications, which every test server has on:
  :data:`NOTIFY_ARGS`). The wait ends on the write that makes the predicate true, not at
  the next tick of a poll. Where nothing is written for :data:`BACKSTOP_S`, it checks once
  more anyway: that covers predicates over state outside Redis (a component's in-memory
  counter, a file a job writes), which a node's lease renewals and a worker's heartbeats
  wake long before in practice.
- :class:`LogWatch` reads a child process's output from its pipe as it comes (copying it to
  the log file) and :meth:`LogWatch.wait_for` returns on the line that says what happened:
  "ready", "ERROR".
- :func:`pids_gone` waits on process ends (pidfds).
- :func:`server_clock_passes` waits for a deadline on the Redis server's clock (ticks go
  by, an age is reached, the audit's settle margin passes).

Timing logic of one component is tested on trio's autojump clock instead (for example
tests/worker/test_claim_gate.py).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import IO, TypeVar

import httpx
import trio

from shardsched.store.redis import Redis
from shardsched.store.redis.connection import Connection, RedisURL
from shardsched.store.redis.errors import RedisError

T = TypeVar("T")

#: Arguments that make a test redis-server publish every write (K: keyspace channel,
#: A: every command class). Tests only: the product never needs them.
NOTIFY_ARGS = ("--notify-keyspace-events", "KA")
#: The longest a wait goes without looking, when nothing at all is written.
BACKSTOP_S = 1.0

#: The redis-servers now up, newest last: a wait listens to the writes of all of them.
_servers: list[str] = []


def watch(url: str) -> None:
    """Listen to this server's writes in every wait from now on (it runs NOTIFY_ARGS)."""
    _servers.append(url)


def unwatch(url: str) -> None:
    if url in _servers:
        _servers.remove(url)


class _Writes:
    """Set whenever any watched server reports a write; a waiter clears it, then looks."""

    def __init__(self) -> None:
        self.event = trio.Event()

    def wrote(self) -> None:
        self.event.set()

    async def next(self) -> None:
        with trio.move_on_after(BACKSTOP_S):
            await self.event.wait()
        self.event = trio.Event()


async def _listen(url: str, writes: _Writes, subscribed: trio.Event) -> None:
    """Report each keyspace notification of one server; reconnect if it goes away (the
    fault tests kill and restart servers)."""
    while True:
        try:
            conn = await Connection.open(RedisURL.parse(url), timeout=2, scripts=False)
            try:
                await conn.send(("PSUBSCRIBE", "__keyspace@*__:*"))
                await conn.read()
                subscribed.set()
                writes.wrote()  # anything may have changed before the subscription
                while True:
                    await conn.read()
                    writes.wrote()
            finally:
                await conn.aclose()
        except (RedisError, OSError):
            subscribed.set()  # nothing to hear from a server that is down or busy
            writes.wrote()
            await trio.sleep(BACKSTOP_S)  # waits out a server that is down: then again


async def wait_until(predicate: Callable[[], Awaitable[T]], timeout: float = 10.0) -> T:
    """Until an async predicate returns something truthy; returns it. Checked first after
    listening has begun (so no write falls between a look and the subscription), then
    after each write reported, then at least every BACKSTOP_S."""
    writes = _Writes()
    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            for url in list(_servers):
                subscribed = trio.Event()
                nursery.start_soon(_listen, url, writes, subscribed)
                await subscribed.wait()
            while True:
                value = await predicate()
                if value:
                    nursery.cancel_scope.cancel()
                    return value
                await writes.next()
    raise AssertionError("unreachable")  # pragma: no cover


class LogWatch:
    """A child's output, read from its pipe by a thread as it comes and copied to
    ``path``; waiters block on the line they expect."""

    def __init__(self, proc: subprocess.Popen[bytes], path: Path) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.path = path
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _pump(self, pipe: IO[bytes]) -> None:
        with pipe, self.path.open("ab") as log:
            for raw in iter(pipe.readline, b""):
                log.write(raw)
                log.flush()
                with self._changed:
                    self._lines.append(raw.decode(errors="replace"))
                    self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def text(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for_sync(self, pattern: str, timeout: float = 20.0, start: int = 0) -> str:
        """The first line from line ``start`` on that matches ``pattern`` (a regex);
        AssertionError with the output so far if the process ends or time runs out first."""
        regex = re.compile(pattern)
        with self._changed:
            seen = start
            ended = self._changed.wait_for(
                lambda: any(regex.search(line) for line in self._lines[seen:]) or self._closed,
                timeout,
            )
            for line in self._lines[seen:]:
                if regex.search(line):
                    return line
        state = "ended" if ended else "timed out"
        raise AssertionError(f"{state} before /{pattern}/: {self.text()[-3000:]}")

    def mark(self) -> int:
        """How many lines there are now: wait_for(..., start=mark()) looks only after."""
        with self._changed:
            return len(self._lines)


def start_logged(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> LogWatch:
    """Start ``cmd`` with its output watched and copied to ``log``."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    return LogWatch(proc, log)


def pids_gone(pids: Iterable[int], timeout: float) -> bool:
    """Whether every pid ended within ``timeout``, waited on pidfds (each turns readable
    when its process ends)."""
    fds: list[int] = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        end = time.monotonic() + timeout
        pending = set(fds)
        while pending:
            left = end - time.monotonic()
            if left <= 0:
                return False
            for fd, _ in poller.poll(left * 1000):
                pending.discard(fd)
                poller.unregister(fd)
        return True
    finally:
        for fd in fds:
            os.close(fd)


def run_event(
    http: httpx.Client, job_id: str, states: Iterable[str], timeout: float = 20.0
) -> dict:
    """The first run state change of ``job_id`` into one of ``states``, read from the
    API's own live event stream (Server-Sent Events, from the start of its history).

    As an EventSource does, a stream the server ends (it does while Redis is unavailable)
    or a 503 is opened again, resuming at the last event's id, until ``timeout``."""
    wanted = set(states)
    deadline = time.monotonic() + timeout
    params = {"job_id": job_id, "since": "1970-01-01T00:00:00Z"}
    last_id: str | None = None
    ends: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        headers = {"last-event-id": last_id} if last_id else {}
        try:
            with http.stream(
                "GET", "/api/v1/events/stream", params=params, headers=headers, timeout=left
            ) as reply:
                if reply.status_code == 503:
                    ends.append("503")
                    # paces a reconnect that ends when the API answers: its own advice
                    time.sleep(min(float(reply.headers.get("retry-after") or 1), 1.0))
                    continue
                assert reply.status_code == 200, reply.read()
                for line in reply.iter_lines():
                    if line.startswith("id:"):
                        last_id = line[3:].strip()
                    elif line.startswith("data:"):
                        event = json.loads(line[5:])
                        if event["new"] in wanted:
                            return event
                ends.append("ended")
        except (httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            ends.append(type(exc).__name__)
    raise AssertionError(f"{job_id} did not reach {wanted} in {timeout} s (streams: {ends})")


def start_redis(args: list[str], log: Path, timeout: float = 10.0) -> LogWatch:
    """A redis-server from ``args``, its log read from stdout, once it says it accepts
    connections (killed if it never does)."""
    watch = start_logged([*args, "--logfile", ""], log)
    try:
        watch.wait_for_sync("Ready to accept connections", timeout=timeout)
    except AssertionError:
        watch.proc.kill()
        watch.proc.wait()
        raise
    return watch


async def server_clock_passes(redis: Redis, at_ms: int) -> None:
    """Until the Redis server's clock, the project's one clock, reads ``at_ms`` or later: a
    deadline on the clock that decides ticks, ages and settle margins, not a guess of this
    process's. Read again after the wait, so a server clock that lags is waited for."""
    while (now := await redis.time_ms()) < at_ms:
        await trio.sleep((at_ms - now) / 1000)  # the time left to the deadline
