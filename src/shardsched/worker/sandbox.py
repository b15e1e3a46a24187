"""What a worker lets a job do: which commands it runs at all, as which user, within
which resource limits.

- **A restricted pool** runs only in-process handlers (``--handlers-only``) or commands
  matching one of the operator's patterns (``--allow-command REGEX``): even a caller who
  can register any job cannot make it run an arbitrary command there. A run the policy
  refuses fails at once with the reason (it is not started, and not handed to another
  worker: which pool runs a job is for routing, not for a refused claim to ping-pong).
- **Privileges**: ``--run-as USER`` runs commands as that user (its uid, gid and groups;
  HOME, USER and LOGNAME its own) via util-linux's ``setpriv``; the worker must be root.
- **Limits** per job: address space (``--limit-memory``), CPU seconds (``--limit-cpu``)
  and open files (``--limit-nofile``), set by util-linux's ``prlimit`` on the job's shell
  before it starts, so every process of the job inherits them.

Both tools exec the next one in place (prlimit → setpriv → ``env -i NAME=VALUE…`` →
``/bin/sh -c``), so the job is still one process group led by the pid the worker spawned,
and posix_spawn stays cheap. The helpers start with a fixed, minimal environment
(:data:`~shardsched.worker.runner.HELPER_ENV`): the job's own is set by ``env`` only after
the uid drop, so a loader variable in it (``LD_PRELOAD``) never acts as root.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
from dataclasses import dataclass, field

from shardsched.core.errors import ConfigError
from shardsched.worker.runner import ENV_TOOL

_SIZE = re.compile(r"^(\d+)([KMG]?)(i?B)?$", re.IGNORECASE)
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


@dataclass(frozen=True)
class Sandbox:
    """How a job's shell is started: the argv before ``/bin/sh -c`` and extra env."""

    prefix: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def make(
        cls,
        run_as: str | None = None,
        memory: str | None = None,
        cpu_s: int | None = None,
        nofile: int | None = None,
    ) -> Sandbox:
        """Check the tools, the user and the limits now, at start-up, not at a job's run."""
        prefix: list[str] = []
        env: dict[str, str] = {}
        limits = []
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
        if (limits or run_as is not None) and not os.access(ENV_TOOL, os.X_OK):
            raise ConfigError(f"{ENV_TOOL} (coreutils) is missing: it sets a sandboxed job's env")
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
