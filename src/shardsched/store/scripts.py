"""The Lua script registry: every lua/*.lua, read once, each run as a Redis Function.

A script's text is what EVAL would run (its helpers inlined: checked by luacheck, its
header by the tests); what Redis is given is its library (store/functions.py): loaded
with FUNCTION LOAD, called with FCALL by the library's name.

The scripts ship inside the wheel as ``shardsched/lua``; in a source checkout (editable
install) they are read from the top-level ``lua/`` folder.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from shardsched.store.functions import library


@dataclass(frozen=True, slots=True)
class Script:
    name: str
    source: bytes  #: the script as EVAL would run it
    sha: str
    library: bytes  #: what FUNCTION LOAD takes (store/functions.py)
    function: str  #: what FCALL calls: the library's one function


_INCLUDE = re.compile(rb"^-- @include (\w+)$", re.MULTILINE)


def _lua_dir() -> Traversable:
    packaged = resources.files("shardsched").joinpath("lua")
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "lua"  # a source checkout


#: The scripts a deploy of an app writes through (ops/apps/deploy.py). Each has a fenced
#: variant, ``fenced:<name>``: lua/lib/fence.lua first (the deploy's generation must be
#: the shard's newest), then the script as written.
FENCED = ("register_job", "update_job", "delete_job", "register_dag", "update_dag")
FENCED_PREFIX = "fenced:"


def _lua_files() -> dict[str, bytes]:
    """Every lua/*.lua, with each ``-- @include name`` line replaced by lua/lib/name.lua
    (helpers shared by scripts, inlined at load time as BullMQ does). A helper includes
    what it calls the same way; each helper is inlined once per script, its own includes
    before it, wherever it is first asked for. Then the fenced variants of :data:`FENCED`."""
    root = _lua_dir()
    lib = root.joinpath("lib")
    raw = {
        p.name.removesuffix(".lua"): p.read_bytes()
        for p in sorted(root.iterdir(), key=lambda p: p.name)
        if p.name.endswith(".lua")
    }
    for name in FENCED:  # after the shebang line (its flags hold for the variant too)
        shebang, _, body = raw[name].partition(b"\n")
        raw[FENCED_PREFIX + name] = shebang + b"\n-- @include fence\n" + body
    return {name: _shake(_inline(source, lib, set(), ())) for name, source in raw.items()}


def _inline(source: bytes, lib: Traversable, done: set[str], path: tuple[str, ...]) -> bytes:
    """``source`` with its includes inlined; ``done``: the helpers this script has by now,
    ``path``: the helpers being inlined (a helper that includes itself is an error)."""

    def include(match: re.Match[bytes]) -> bytes:
        name = match.group(1).decode()
        if name in path:
            raise RuntimeError(f"lua/lib: an include cycle: {' -> '.join((*path, name))}")
        if name in done:
            return b""
        done.add(name)
        text = lib.joinpath(name + ".lua").read_bytes().rstrip()
        return _inline(text, lib, done, (*path, name))

    return _INCLUDE.sub(include, source)


#: A function defined at the top level: ``local function name(`` to the next ``end`` at
#: the start of a line (the scripts' and helpers' layout; a nested ``end`` is indented).
_FUNCTION = re.compile(rb"^local function (\w+)\(.*?^end$\n?", re.MULTILINE | re.DOTALL)
_COMMENT = re.compile(rb"--\[\[.*?\]\]|--[^\n]*", re.DOTALL)
_WORD = re.compile(rb"\w+")  #: a word: a name is used where it is a whole word


def _shake(source: bytes) -> bytes:
    """``source`` without the top-level functions nothing in it calls: Redis defines
    every function of a script on every call, so a helper a script includes but never
    reaches would cost each call its definition. Repeated until none is left to drop (a
    helper called only by a dropped one goes too)."""
    while True:
        code = _COMMENT.sub(b"", source)
        uses = Counter(_WORD.findall(code))
        unused = [
            match.group(1)
            for match in _FUNCTION.finditer(code)  # called nowhere but in its own body
            if uses[match.group(1)] == _WORD.findall(match.group(0)).count(match.group(1))
        ]
        if not unused:
            return source
        for name in unused:
            pattern = rb"^local function " + name + rb"\(.*?^end$\n?"
            source = re.sub(pattern, b"", source, count=1, flags=re.MULTILINE | re.DOTALL)


def _load() -> dict[str, Script]:
    scripts = {}
    for name, source in _lua_files().items():
        if not source.startswith(b"#!lua"):
            raise RuntimeError(f"lua/{name}.lua must start with a #!lua shebang")
        lib = library(name, source)
        scripts[name] = Script(name, source, hashlib.sha1(source).hexdigest(), lib.code, lib.name)
    if not scripts:
        raise RuntimeError("no Lua scripts found: is the package installed with its lua/ data?")
    return scripts


SCRIPTS: dict[str, Script] = _load()

#: FCALL's error for a function the server does not have (redis-py drops the "ERR ").
FUNCTION_NOT_FOUND = "Function not found"


def fcall(name: str, keys: Sequence[Any], args: Sequence[Any]) -> tuple[Any, ...]:
    """The command that runs the script ``name``."""
    return ("FCALL", SCRIPTS[name].function, len(keys), *keys, *args)


def not_found(replies: Sequence[Any]) -> list[int]:
    """Which replies say the server lacks the function called (FUNCTION FLUSH, a server
    never given them): they are loaded and those calls made again."""
    return [
        i
        for i, r in enumerate(replies)
        if isinstance(r, Exception) and str(r).removeprefix("ERR ").startswith(FUNCTION_NOT_FOUND)
    ]


def load_functions() -> list[tuple[str, str, bytes]]:
    """The commands that give a server every library (FUNCTION LOAD, at connect)."""
    return [("FUNCTION", "LOAD", s.library) for s in SCRIPTS.values()]


def loaded_anyway(error: Exception) -> bool:
    """Whether a FUNCTION LOAD's error leaves the library usable: it is there already (a
    library's name is its text's hash), or the server is a replica (its primary's are
    replicated to it) or full (they were loaded before it filled)."""
    text = str(error)
    return "already exists" in text or text.split(" ", 1)[0] in {"READONLY", "OOM"}
