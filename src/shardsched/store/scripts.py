"""The Lua script registry: every lua/*.lua, read once, called by SHA.

The scripts ship inside the wheel as ``shardsched/lua``; in a source checkout (editable
install) they are read from the top-level ``lua/`` folder.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: bytes
    sha: str


_INCLUDE = re.compile(rb"^-- @include (\w+)$", re.MULTILINE)


def _lua_dir() -> Traversable:
    packaged = resources.files("shardsched").joinpath("lua")
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "lua"  # a source checkout


def _lua_files() -> dict[str, bytes]:
    """Every lua/*.lua, with each ``-- @include name`` line replaced by lua/lib/name.lua
    (helpers shared by scripts, inlined at load time as BullMQ does)."""
    root = _lua_dir()
    lib = root.joinpath("lib")

    def include(match: re.Match[bytes]) -> bytes:
        return lib.joinpath(match.group(1).decode() + ".lua").read_bytes().rstrip()

    return {
        p.name.removesuffix(".lua"): _INCLUDE.sub(include, p.read_bytes())
        for p in sorted(root.iterdir(), key=lambda p: p.name)
        if p.name.endswith(".lua")
    }


def _load() -> dict[str, Script]:
    scripts = {}
    for name, source in _lua_files().items():
        if not source.startswith(b"#!lua"):
            raise RuntimeError(f"lua/{name}.lua must start with a #!lua shebang")
        scripts[name] = Script(name, source, hashlib.sha1(source).hexdigest())
    if not scripts:
        raise RuntimeError("no Lua scripts found: is the package installed with its lua/ data?")
    return scripts


SCRIPTS: dict[str, Script] = _load()
