"""What a worker lets a job do: which commands it runs at all, as which user, within
which resource limits.

- **A restricted pool** runs only in-process handlers (``--handlers-only``) or commands
  matching one of the operator's patterns (``--allow-command REGEX``): even a caller who
  can register any job cannot make it run an arbitrary command there. A run the policy
  refuses fails at once with the reason (it is not started, and not handed to another
  worker: which pool runs a job is for routing, not for a refused claim to ping-pong).
- **Privileges**: ``--run-as USER`` runs commands as that user (its uid, gid and groups;
  HOME, USER and LOGNAME its own) via util-linux's ``setpriv``; the worker must be root.
  ``--run-as-uids FIRST-LAST`` runs each command as a uid of its own from that range
  (gid the same, no supplementary groups), none shared by two runs at once: a job cannot
  read another's ``/proc/<pid>/environ`` (its secrets), signal or ptrace it, and once a
  run ends every process left under its uid is killed before the uid is used again.
- **Limits** per job: address space (``--limit-memory``), CPU seconds (``--limit-cpu``),
  open files (``--limit-nofile``) and processes (``--limit-nproc``: the kernel counts
  them per uid, so per run with ``--run-as-uids``), set by util-linux's ``prlimit`` on
  the job's shell before it starts, so every process of the job inherits them.

Both tools exec the next one in place (prlimit → setpriv → ``env -i NAME=VALUE…`` →
``/bin/sh -c``), so the job is still one process group led by the pid the worker spawned,
and posix_spawn stays cheap. The helpers start with a fixed, minimal environment
(:data:`~shardsched.worker.runner.HELPER_ENV`): the job's own is set by ``env`` only after
the uid drop, so a loader variable in it (``LD_PRELOAD``) never acts as root.
"""

from __future__ import annotations

import collections
import logging
import os
import pwd
import re
import shutil
import subprocess
from dataclasses import dataclass, field

import trio

from shardsched.core.errors import ConfigError
from shardsched.worker.runner import ENV_TOOL

log = logging.getLogger(__name__)
_SIZE = re.compile(r"^(\d+)([KMG]?)(i?B)?$(?!\n)", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """Bytes of ``512M``, ``2G``, ``1048576`` (K, M, G are powers of 1024)."""
    m = _SIZE.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise ConfigError(f"not a memory size: {text!r} (e.g. 512M, 2G)")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


@dataclass(frozen=True)
class CommandPolicy:
    """Which runs a worker executes at all."""

    handlers_only: bool = False
    allowed: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, handlers_only: bool, patterns: list[str]) -> CommandPolicy:
        try:
            compiled = tuple(re.compile(p) for p in patterns)
        except re.error as exc:
            raise ConfigError(f"--allow-command: {exc}") from None
        return cls(handlers_only, compiled)

    def refusal(self, command: str) -> str | None:
        """Why a shell command may not run here (None: it may)."""
        if self.handlers_only:
            return "refused by this worker: it runs in-process handlers only"
        if self.allowed and not any(p.fullmatch(command) for p in self.allowed):
            return "refused by this worker: the command matches no --allow-command pattern"
        return None


def parse_uids(text: str) -> range:
    """``FIRST-LAST`` (inclusive) as a range of uids, above the system's and root's."""
    first, sep, last = text.partition("-")
    if not sep or not first.strip().isdigit() or not last.strip().isdigit():
        raise ConfigError(f"--run-as-uids wants FIRST-LAST, e.g. 200000-200999, not {text!r}")
    uids = range(int(first), int(last) + 1)
    if not uids or uids.start < 1000 or uids.stop > 2**31:
        raise ConfigError("--run-as-uids: a non-empty range within 1000..2147483647")
    return uids


class UidPool:
    """The uids of ``--run-as-uids`` not in use by a run of this worker. Belongs to the
    worker's executor (one trio thread): taken at a command's spawn, given back once every
    process left under it is killed."""

    def __init__(self, uids: range, kill_tool: str, setpriv: str) -> None:
        self._free = collections.deque(uids)  #: the longest free first
        self._kill = kill_tool
        self._setpriv = setpriv

    def take(self) -> int:
        """The uid free the longest that no process has, a zombie included (killed
        children wait for init to reap them, and the kernel still counts them against
        --limit-nproc: the next run under that uid could not fork); the longest free
        if each has one."""
        if not self._free:  # more commands at once than uids: refused at start-up
            raise RuntimeError("no uid left in --run-as-uids")
        busy = uids_with_processes()
        for uid in self._free:
            if uid not in busy:
                self._free.remove(uid)
                return uid
        log.warning("every free uid of --run-as-uids still has processes: widen the range")
        return self._free.popleft()

    async def give(self, uid: int) -> None:
        """Kill whatever still runs as ``uid`` (a job's daemon, a fork bomb's last
        children: kill(-1, SIGKILL) as that uid reaches them all at once and nothing
        else; by perl, which Debian always has, since procps' and dash's kill do not
        take -1 alike), then let the next run have it."""
        try:
            await trio.run_process(
                [self._setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                 self._kill, "-e", 'kill "KILL", -1'],
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, check=False,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        finally:
            self._free.append(uid)


def uids_with_processes() -> set[int]:
    """The real uids of every process on the machine, zombies included (from /proc)."""
    out: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as status:
                for line in status:
                    if line.startswith(b"Uid:"):
                        out.add(int(line.split()[1]))
                        break
        except OSError:  # gone meanwhile
            continue
    return out


@dataclass(frozen=True)
class Sandbox:
    """How a job's shell is started: the argv before ``/bin/sh -c`` and extra env; with
    ``uids``, the uid drop is made per run (:meth:`for_uid`)."""

    prefix: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    uids: UidPool | None = None

    def for_uid(self, uid: int) -> tuple[tuple[str, ...], dict[str, str]]:
        """The prefix and env of a run as ``uid`` (``prefix`` holds the limits and the
        path of setpriv, last)."""
        *limits, setpriv = self.prefix
        drop = (setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--")
        name = f"shardsched-{uid}"
        return (*limits, *drop), {"HOME": "/tmp", "USER": name, "LOGNAME": name}

    @classmethod
    def make(
        cls,
        run_as: str | None = None,
        memory: str | None = None,
        cpu_s: int | None = None,
        nofile: int | None = None,
        nproc: int | None = None,
        run_as_uids: str | None = None,
        concurrency: int = 1,
    ) -> Sandbox:
        """Check the tools, the user and the limits now, at start-up, not at a job's run."""
        prefix: list[str] = []
        env: dict[str, str] = {}
        limits = []
        if nproc is not None:
            if nproc < 1:
                raise ConfigError("--limit-nproc wants at least 1")
            limits.append(f"--nproc={nproc}")
        if memory is not None:
            limits.append(f"--as={parse_size(memory)}")
        if cpu_s is not None:
            if cpu_s < 1:
                raise ConfigError("--limit-cpu wants whole seconds >= 1")
            limits.append(f"--cpu={cpu_s}")
        if nofile is not None:
            if nofile < 3:
                raise ConfigError("--limit-nofile wants at least 3 (stdin, stdout, stderr)")
            limits.append(f"--nofile={nofile}")
        if limits:
            prefix += [_tool("prlimit"), *limits, "--"]
        if (limits or run_as or run_as_uids) and not os.access(ENV_TOOL, os.X_OK):
            raise ConfigError(f"{ENV_TOOL} (coreutils) is missing: it sets a sandboxed job's env")
        if run_as is not None and run_as_uids is not None:
            raise ConfigError("--run-as and --run-as-uids exclude each other")
        if run_as_uids is not None:
            uids = parse_uids(run_as_uids)
            if len(uids) < concurrency:
                raise ConfigError(
                    f"--run-as-uids has {len(uids)} uids for --concurrency {concurrency}: "
                    "every run at once needs one of its own"
                )
            if os.geteuid() != 0:
                raise ConfigError("--run-as-uids needs the worker to run as root (to drop)")
            setpriv = _tool("setpriv")
            kill = shutil.which("perl") or "/usr/bin/perl"
            if not os.access(kill, os.X_OK):
                raise ConfigError("perl is missing: it ends what a run leaves behind")
            return cls((*prefix, setpriv), {}, UidPool(uids, kill, setpriv))
        if run_as is not None:
            try:
                user = pwd.getpwnam(run_as)
            except KeyError:
                raise ConfigError(f"--run-as: no user {run_as!r}") from None
            if os.geteuid() != 0:
                raise ConfigError("--run-as needs the worker to run as root (to drop to it)")
            prefix += [_tool("setpriv"), f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}"]
            prefix += ["--init-groups", "--"]
            env = {"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name}
        return cls(tuple(prefix), env)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ConfigError(f"{name} (util-linux) is not installed: it applies the job limits")
    return path
