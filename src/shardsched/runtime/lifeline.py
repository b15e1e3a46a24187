"""Children that die with their parent, whichever thread spawned them and however it died.

``PR_SET_PDEATHSIG`` looked like the tool, but it fires when the *thread* that forked the
child exits, and trio spawns from cached worker threads that retire after 10 s idle: every
job and every ``dev`` child was killed 10 s after an idle spawn. It also needs a
``preexec_fn``, which makes CPython fork the whole interpreter instead of using vfork (5x
slower spawns). So no child is tied to a thread any more.

Instead each process that must not leave children behind starts one small *guardian*: a
bare Python interpreter reading a pipe whose only write end the parent holds. The parent
tells it, one short line each, which process groups (jobs) and processes (redis-server,
workers) it started and which it reaped. When the parent dies, by kill -9 or otherwise,
the kernel closes the pipe; the guardian reads EOF and kills what is registered: job groups
with SIGKILL at once (their run is delivered again after its lease, and a job still running
then would be a second, concurrent execution), processes with SIGTERM and then SIGKILL
after a grace. Every child also carries ``SHARDSCHED_LIFELINE=<token>`` in its environment;
the guardian kills any process that still carries it, so a child spawned in the instant
before the parent died (not registered yet), or a grandchild that left its group, goes too.
A job that wipes its environment *and* leaves its process group escapes: documented.

The cost on the hot path is one ``os.write`` of a few bytes per spawn and per reap.
"""

from __future__ import annotations

import atexit
import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path

#: The environment variable every child carries, naming its parent's guardian.
ENV = "SHARDSCHED_LIFELINE"

#: Seconds the guardian gives a registered process (not a job) between SIGTERM and SIGKILL.
PROCESS_GRACE_S = 5.0

#: The guardian runs as a bare script (``-I -S``): no package import, ~10 ms to start.
_GUARDIAN = str(Path(__file__).with_name("_guardian.py"))


class Lifeline:
    """The parent's side of one guardian process. Not thread-safe: call it from one thread
    (the trio thread, or a benchmark's main thread)."""

    def __init__(self, grace_s: float = PROCESS_GRACE_S) -> None:
        self.token = secrets.token_hex(8)
        self._grace_s = grace_s
        self._held: set[bytes] = set()
        self._released = b""  #: releases not sent yet: they ride along with the next write
        self._fd = -1
        self._guardian: subprocess.Popen[bytes] | None = None
        self._start()

    @property
    def env(self) -> dict[str, str]:
        """Environment entries every child must carry."""
        return {ENV: self.token}

    def _start(self) -> None:
        read, write = os.pipe()  # non-inheritable: no other child keeps the write end open
        try:
            self._guardian = subprocess.Popen(
                [sys.executable, "-I", "-S", _GUARDIAN, self.token, str(self._grace_s)],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not hit by a terminal's Ctrl-C aimed at the parent
                close_fds=True,
                # without our own marker: a guardian above us must not take this one along
                env={k: v for k, v in os.environ.items() if k != ENV},
            )
        finally:
            os.close(read)
        self._fd = write
        if self._held:
            self._send(b"".join(b"+" + h + b"\n" for h in self._held))

    def _send(self, data: bytes) -> None:
        try:
            os.write(self._fd, data)
        except (BrokenPipeError, OSError):
            # Someone killed the guardian: start another and tell it everything again.
            os.close(self._fd)
            if self._guardian is not None:
                self._guardian.poll()
            self._start()

    def hold(self, pid: int, *, group: bool) -> None:
        """Kill ``pid`` (its whole process group if ``group``) when this process dies."""
        entry = (b"g" if group else b"p") + str(pid).encode()
        self._held.add(entry)
        released, self._released = self._released, b""
        self._send(released + b"+" + entry + b"\n")

    def release(self, pid: int, *, group: bool) -> None:
        """``pid`` was reaped: forget it. Sent with the next hold (one write per job, not
        two); until then the guardian would at worst signal a group that is gone."""
        entry = (b"g" if group else b"p") + str(pid).encode()
        self._held.discard(entry)
        self._released += b"-" + entry + b"\n"
        if len(self._released) > 4096:
            released, self._released = self._released, b""
            self._send(released)

    def close(self) -> None:
        """A clean exit: the guardian kills only what is still held or marked (nothing, when
        every child was stopped and released), and is waited for."""
        if self._fd < 0:
            return
        if self._released:
            self._send(self._released)
            self._released = b""
        self._held.clear()
        os.close(self._fd)
        self._fd = -1
        if self._guardian is not None:
            try:
                self._guardian.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._guardian.kill()
                self._guardian.wait()


_lock = threading.Lock()
_current: tuple[int, Lifeline] | None = None


def lifeline() -> Lifeline:
    """This process's lifeline, started on first use (again in a forked child)."""
    global _current
    with _lock:
        if _current is None or _current[0] != os.getpid():
            _current = (os.getpid(), Lifeline())
            atexit.register(_current[1].close)
        return _current[1]


_base_env: tuple[int, dict[str, str]] | None = None


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: ours (read once), plus ``extra``, plus the marker."""
    global _base_env
    if _base_env is None or _base_env[0] != os.getpid():
        _base_env = (os.getpid(), {**os.environ, **lifeline().env})
    base = _base_env[1]
    return {**base, **extra, ENV: base[ENV]} if extra else dict(base)
