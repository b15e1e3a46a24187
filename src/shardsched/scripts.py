"""The Lua script registry: every lua/*.lua, read once, called by SHA.

The scripts ship inside the wheel as ``shardsched/lua``; in a source checkout (editable
install) they are read from the top-level ``lua/`` folder.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: bytes
    sha: str


def _lua_files() -> dict[str, bytes]:
    packaged = resources.files("shardsched").joinpath("lua")
    if packaged.is_dir():
        return {
            p.name.removesuffix(".lua"): p.read_bytes()
            for p in packaged.iterdir()
            if p.name.endswith(".lua")
        }
    checkout = Path(__file__).resolve().parents[2] / "lua"
    return {p.stem: p.read_bytes() for p in sorted(checkout.glob("*.lua"))}


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
