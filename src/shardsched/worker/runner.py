"""Run one job command as a subprocess: its own process group, a hard timeout, capped output.

The command runs under ``/bin/sh -c`` in a new session, so a timeout (or a job that leaves
children behind) is dealt with by signalling the whole group: SIGTERM, a grace period,
then SIGKILL. Output (stdout and stderr interleaved) keeps its last ``limit`` bytes.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass

import trio

OUTPUT_LIMIT = 64 * 1024
KILL_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class Outcome:
    exit_code: int | None  #: None when the process did not exit on its own
    reason: str | None  #: "timeout", "signal SIGKILL", "spawn failed: …"; None on exit
    output: bytes

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


def _die_with_worker() -> None:
    """A worker killed with SIGKILL cannot kill its jobs: have the kernel do it (Linux).
    The run is delivered again after its lease; a job still running then would be a
    second, concurrent execution."""
    from shardsched.dev import die_with_parent

    die_with_parent()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _drain(stream: trio.abc.ReceiveStream, buf: bytearray, limit: int) -> None:
    while data := await stream.receive_some(65536):
        buf += data
        if len(buf) > 2 * limit:
            del buf[:-limit]


async def run_command(
    command: str,
    timeout_s: float,
    env: dict[str, str],
    limit: int = OUTPUT_LIMIT,
    kill_grace_s: float = KILL_GRACE_S,
) -> Outcome:
    """Run ``command`` to completion or timeout; never raises for the job's own failures."""
    buf = bytearray()
    try:
        proc = await trio.lowlevel.open_process(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **env},
            preexec_fn=_die_with_worker,
        )
    except OSError as exc:
        return Outcome(None, f"spawn failed: {exc}", b"")
    pgid = proc.pid  # start_new_session: the child leads its own group
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            assert proc.stdout is not None
            nursery.start_soon(_drain, proc.stdout, buf, limit)
            with trio.move_on_after(timeout_s):
                await proc.wait()
            if proc.returncode is None:
                timed_out = True
                _signal_group(pgid, signal.SIGTERM)
                with trio.move_on_after(kill_grace_s):
                    await proc.wait()
            # Whatever the outcome, nothing of the job outlives it: a background child
            # holding the pipe open would otherwise keep us reading forever.
            _signal_group(pgid, signal.SIGKILL)
            await proc.wait()
            # The pipe reaches EOF once the group is gone; don't wait long for stragglers
            # that escaped into another session.
            nursery.cancel_scope.deadline = trio.current_time() + 1
    finally:
        if proc.returncode is None:
            _signal_group(pgid, signal.SIGKILL)
            with trio.move_on_after(2, shield=True):
                await proc.wait()
    output = bytes(buf[-limit:])
    if timed_out:
        return Outcome(None, "timeout", output)
    code = proc.returncode
    if code < 0:
        return Outcome(None, f"signal {signal.Signals(-code).name}", output)
    return Outcome(code, None if code == 0 else f"exit {code}", output)
