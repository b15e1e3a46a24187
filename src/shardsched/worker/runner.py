"""Run one job command as a subprocess: its own process group, a hard timeout, capped output.

The command runs under ``/bin/sh -c`` in a new session, so a timeout (or a job that leaves
children behind) is dealt with by signalling the whole group: SIGTERM, a grace period,
then SIGKILL. Output (stdout and stderr interleaved) keeps its last ``limit`` bytes.

A job lives until it exits, its timeout, a ``replace``, a drain or the death of its worker:
the group is held on this process's :mod:`~shardsched.runtime.lifeline`, so a worker killed with
SIGKILL still takes its jobs along, whichever thread spawned them. No ``preexec_fn``:
CPython can then spawn with vfork instead of copying the whole worker.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import trio

from shardsched.runtime.lifeline import lifeline

OUTPUT_LIMIT = 64 * 1024
KILL_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class Outcome:
    exit_code: int | None  #: None when the process did not exit on its own
    reason: str | None  #: "timeout", "signal SIGKILL", "spawn failed: …"; None on exit
    output: bytes
    total: int | None = None  #: bytes printed in all (``output`` is their tail); None: len

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


@dataclass(slots=True)
class LiveOutput:
    """A running command's output so far: its tail (at most twice the limit) and how many
    bytes it printed in all. The worker's output flusher reads it while the job runs."""

    buf: bytearray
    total: int = 0
    #: a command is running: :meth:`request_stop` stops it gracefully (else the run's
    #: scope is cancelled)
    graceful: bool = False
    stopping: bool = False  #: a cancel asked it to stop as a timeout would
    #: the wait for the command's exit, which a stop request ends early
    waiting: trio.CancelScope | None = None

    def request_stop(self) -> None:
        """Stop the command as a timeout would (SIGTERM, the grace, SIGKILL): a cancel."""
        self.stopping = True
        if self.waiting is not None:
            self.waiting.cancel()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _drain(stream: trio.abc.ReceiveStream, live: LiveOutput, limit: int) -> None:
    buf = live.buf
    while data := await stream.receive_some(65536):
        buf += data
        live.total += len(data)
        if len(buf) > 2 * limit:
            del buf[:-limit]


async def _wait_exit(pid: int) -> int:
    """Wait for ``pid`` to exit (a pidfd: no thread, no SIGCHLD); its wait status."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux >= 5.3: a thread blocks in waitpid
        return (await trio.to_thread.run_sync(os.waitpid, pid, 0, abandon_on_cancel=False))[1]
    try:
        await trio.lowlevel.wait_readable(pidfd)
    finally:
        os.close(pidfd)
    return os.waitpid(pid, 0)[1]


#: The whole environment of the sandbox's helpers (prlimit, setpriv), which may run as
#: root: nothing of the job's reaches them, so no loader or libc variable a job sets can
#: act with their privileges.
HELPER_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
#: Sets the job's environment after the helpers, i.e. after the uid drop.
ENV_TOOL = "/usr/bin/env"


def spawn_argv(
    command: str, env: dict[str, str], prefix: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment to spawn: ``/bin/sh -c command`` with ``env``, or, behind
    a sandbox ``prefix``, the helpers with :data:`HELPER_ENV` and ``env -i NAME=VALUE…``
    as their last step, so the job's own environment exists only in the dropped process."""
    if not prefix:
        return ["/bin/sh", "-c", command], env
    assignments = [f"{name}={value}" for name, value in env.items()]
    argv = [*prefix, ENV_TOOL, "-i", *assignments, "/bin/sh", "-c", command]
    return argv, {**HELPER_ENV, **lifeline().env}


def _spawn(command: str, env: dict[str, str], prefix: tuple[str, ...] = ()) -> tuple[int, int]:
    """Start ``/bin/sh -c command`` in a new session, output to a pipe; (pid, pipe's read fd).

    ``posix_spawn`` (vfork underneath) on the calling thread: no thread hand-off and no copy
    of the worker's memory. Our other descriptors are all close-on-exec (PEP 446).
    """
    argv, spawn_env = spawn_argv(command, env, prefix)  # prefix: prlimit/setpriv
    read, write = os.pipe()
    try:
        pid = os.posix_spawn(
            argv[0],
            argv,
            spawn_env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, write, 1),
                (os.POSIX_SPAWN_DUP2, write, 2),
            ],
            setsid=True,
        )
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return pid, read


async def run_command(
    command: str,
    timeout_s: float,
    env: dict[str, str],
    limit: int = OUTPUT_LIMIT,
    kill_grace_s: float = KILL_GRACE_S,
    prefix: tuple[str, ...] = (),
    live: LiveOutput | None = None,
) -> Outcome:
    """Run ``command`` to completion or timeout; never raises for the job's own failures.
    ``live``: where its output collects while it runs (for the output flusher)."""
    live = live or LiveOutput(bytearray())
    buf = live.buf
    try:
        # exactly ``env``, plus the lifeline's marker so a stray descendant dies with us
        pid, out_fd = _spawn(command, {**env, **lifeline().env}, prefix)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte stored before the check
        return Outcome(None, f"spawn failed: {exc}"[:500], b"")
    pgid = pid  # setsid: the child leads its own group
    guard = lifeline()
    guard.hold(pgid, group=True)
    timed_out = stopped = False
    status: int | None = None
    stream = trio.lowlevel.FdStream(out_fd)
    live.graceful = True
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, stream, live, limit)
            with trio.move_on_after(timeout_s) as waiting:
                live.waiting = waiting  # no task of its own per run: a cancel ends the wait
                if live.stopping:
                    waiting.cancel()
                status = await _wait_exit(pid)
            live.waiting = None
            if status is None:
                stopped = live.stopping
                timed_out = not stopped
                _signal_group(pgid, signal.SIGTERM)
                with trio.move_on_after(kill_grace_s):
                    status = await _wait_exit(pid)
            # Whatever the outcome, nothing of the job outlives it: a background child
            # holding the pipe open would otherwise keep us reading forever.
            _signal_group(pgid, signal.SIGKILL)
            if status is None:
                status = await _wait_exit(pid)
            # The pipe reaches EOF once the group is gone; don't wait long for stragglers
            # that escaped into another session.
            nursery.cancel_scope.deadline = trio.current_time() + 1
    finally:
        if status is None:  # cancelled (replace, drain, lost lease): kill and reap
            _signal_group(pgid, signal.SIGKILL)
            with trio.move_on_after(2, shield=True):
                status = await _wait_exit(pid)
        guard.release(pgid, group=True)
        await stream.aclose()
    output, total = bytes(buf[-limit:]), live.total
    if stopped:
        return Outcome(None, "cancelled", output, total)
    if timed_out:
        return Outcome(None, "timeout", output, total)
    if status is None:
        return Outcome(None, "not reaped", output, total)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name if number in signal.valid_signals() else number
        return Outcome(None, f"signal {name}", output, total)
    code = os.waitstatus_to_exitcode(status)
    return Outcome(code, None if code == 0 else f"exit {code}", output, total)
