"""The guardian of :mod:`shardsched.runtime.lifeline`, run as a bare script:
``_guardian.py TOKEN GRACE``.

Reads ``+g<pgid>``/``-g<pgid>`` (job process groups) and ``+p<pid>``/``-p<pid>`` (processes)
lines from stdin until EOF, which means the parent died (or closed it: a clean exit). Then
kills the groups with SIGKILL, the processes with SIGTERM and SIGKILL after GRACE seconds,
and last every process whose environment still carries ``SHARDSCHED_LIFELINE=TOKEN``.
Imports nothing of shardsched: it must start fast and survive a broken install.
"""

import os
import signal
import sys
import time
from collections.abc import Callable

for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
token, grace = sys.argv[1].encode(), float(sys.argv[2])
groups: set[int] = set()
procs: set[int] = set()
buf = b""
while True:
    try:
        data = os.read(0, 65536)
    except InterruptedError:
        continue
    if not data:
        break
    buf += data
    *lines, buf = buf.split(b"\n")
    for line in lines:
        if len(line) < 3:
            continue
        held = groups if line[1:2] == b"g" else procs
        pid = int(line[2:])
        if line[:1] == b"+":
            held.add(pid)
        else:
            held.discard(pid)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def kill(fn: Callable[[int, int], None], pid: int, sig: int) -> None:
    try:
        fn(pid, sig)
    except OSError:
        pass


for g in groups:
    kill(os.killpg, g, signal.SIGKILL)
for p in procs:
    kill(os.kill, p, signal.SIGTERM)
deadline = time.monotonic() + grace
while any(alive(p) for p in procs) and time.monotonic() < deadline:
    time.sleep(0.05)
for p in procs:
    kill(os.kill, p, signal.SIGKILL)
marker, me = b"\0" + b"SHARDSCHED_LIFELINE=" + token + b"\0", os.getpid()
for _ in range(3):  # a process may fork while we look: look again
    found = False
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = b"\0" + f.read()
        except OSError:
            continue
        if marker in env:
            found = True
            kill(os.kill, int(name), signal.SIGKILL)
    if not found:
        break
