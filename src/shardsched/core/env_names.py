"""What a job may set in its environment (its ``env`` map): the names, and the ones it may
not (what the loader, libc, shells and runtimes act on before the job's own code)."""

from __future__ import annotations

from typing import Annotated

import msgspec

#: No NUL in a value (the kernel's execve cannot carry one; router/http.py says so plainly)
_NO_NUL = r"^[^\x00]*$"
#: Environment variables the dynamic loader, libc, shells and language runtimes act on
#: before (or instead of) the job's own code: a job may not set them (docs/security.md).
#: From glibc's list of variables it drops for setuid programs (unsecvars.h), the shells'
#: start-up and parsing variables, and the interpreters' start-up options.
DENIED_ENV_PREFIXES = ("LD_", "DYLD_", "MALLOC_", "GLIBC_", "PYTHON", "PERL5", "RUBY", "LUA_")
DENIED_ENV_NAMES = (
    "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH",
    "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR", "BASH_ENV", "ENV", "IFS",
    "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "PERLLIB", "PERLIO", "NODE_OPTIONS",
    "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "TCLLIBPATH",
    "OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES",
)  # fmt: skip
_DENIED = "|".join([*DENIED_ENV_PREFIXES, *(f"{name}$" for name in DENIED_ENV_NAMES)])
ENV_NAME_PATTERN = rf"^(?!SHARDSCHED_)(?!(?:{_DENIED}))[A-Za-z_][A-Za-z0-9_]*$(?!\n)"
#: A job's own environment variables: a shell name, not one of the worker's SHARDSCHED_*
#: run variables (which always win) nor one of the denied names above; a value up to 4 KiB
#: with no NUL; up to 100 of them. Not secret: they are stored and shown with the job.
EnvName = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=128, pattern=ENV_NAME_PATTERN),
]
EnvMap = Annotated[
    dict[EnvName, Annotated[str, msgspec.Meta(max_length=4096, pattern=_NO_NUL)]],
    msgspec.Meta(max_length=100),
]


def env_name_refused(name: str) -> str | None:
    """Why a job may not set the variable ``name``, in words (None: it may): what an
    importer says of a crontab's or a manifest's env line."""
    if name.startswith("SHARDSCHED_"):
        return "SHARDSCHED_* are the worker's run variables"
    if name.startswith(DENIED_ENV_PREFIXES) or name in DENIED_ENV_NAMES:
        return (
            "the loader, a shell or a runtime acts on it before the job's code (docs/security.md)"
        )
    if (
        not name
        or len(name) > 128
        or not (name[0].isalpha() or name[0] == "_")
        or not all(c.isascii() and (c.isalnum() or c == "_") for c in name)
    ):
        return "not a variable name (letters, digits and _, not starting with a digit)"
    return None
