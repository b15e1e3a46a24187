"""Each script as a Redis Functions library: its helpers defined once, at load.

Redis runs an EVALSHA script's body on every call, so each call defined all of the
script's helper functions again (closures, their upvalues, their garbage): ~31,000
instructions of a one-item fire call's 231,000 (bench/RESULTS.md, "Where a one-run
script call goes"). A library's top level runs once, at FUNCTION LOAD; its function runs
per FCALL. So each script becomes a library whose top level holds what does not change
from one call to the next (the helpers that use only Redis's API, constants and each
other), and whose function, ``main(KEYS, ARGV)``, holds the rest in its order: what
reads KEYS or ARGV or keeps state for one call stays per call, as before.

Which helpers may move is read from the text (:func:`free_names`); luacheck on every
library (tests/store/test_lua_lint.py) is the independent check that nothing moved reads
a name of ``main``'s. One library per script, named after its text's hash, so two
releases side by side (a rolling deploy) each call their own.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

#: What a library's top level may use: Lua's and Redis's globals.
GLOBALS = frozenset(
    b"redis cjson cmsgpack bit struct string table math tonumber tostring type pairs ipairs"
    b" next select unpack error pcall xpcall assert setmetatable getmetatable rawget rawset"
    b" rawequal".split()
)
KEYWORDS = frozenset(
    b"and break do else elseif end false for function if in local nil not or repeat return"
    b" then true until while".split()
)

_TOKEN = re.compile(
    rb"--\[(?P<ceq>=*)\[.*?\](?P=ceq)\]"  # a long comment
    rb"|--[^\n]*"  # a comment
    rb"|\[(?P<seq>=*)\[.*?\](?P=seq)\]"  # a long string
    rb"|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"  # a string
    rb"|(?P<name>[A-Za-z_]\w*)"
    rb"|\d[\w.]*"  # a number (its exponent's sign is a token of its own: harmless)
    rb"|\.\.\.|\.\.|==|~=|<=|>=|\S",
    re.DOTALL,
)

#: A top-level function (the scripts' and helpers' layout: ``end`` at the start of a line
#: closes it; a nested one is indented), a top-level constant, and the shebang's flags.
_FUNCTION = re.compile(rb"^local function (\w+)\(.*?^end$\n?", re.MULTILINE | re.DOTALL)
_CONSTANT = re.compile(
    rb"^local (\w+) = (-?\d+|'[^'\\\n]*'|\"[^\"\\\n]*\"|redis\.call)[ \t]*(?:--[^\n]*)?$\n?",
    re.MULTILINE,
)
#: A top-level table of constants: read only if every use of it indexes it (``T[k]``).
_TABLE = re.compile(rb"^local (\w+) = \{[^{}]*\}[ \t]*(?:--[^\n]*)?$\n?", re.MULTILINE)
_FLAGS = re.compile(rb"^#!lua(?: flags=([\w,-]+))?$")


def _uses(toks: list[bytes], name: bytes) -> tuple[int, list[int]]:
    """How often ``name`` is declared (``local name``), and where else it stands as a
    name (not a field after ``.`` or ``:``)."""
    declared, at = 0, []
    for i, tok in enumerate(toks):
        if tok != name or (i and toks[i - 1] in (b".", b":")):
            continue
        if i and toks[i - 1] == b"local":
            declared += 1
        else:
            at.append(i)
    return declared, at


def _never_assigned(toks: list[bytes], name: bytes) -> bool:
    """Whether ``name`` is declared once and never assigned (``name =``, ``name, x =``,
    ``x, name =``): a value the library may keep from one call to the next."""
    declared, at = _uses(toks, name)
    for i in at:
        after = toks[i + 1 : i + 4]
        if after[:1] == [b"="] or (after[:1] == [b","] and after[2:3] == [b"="]):
            return False
        if i > 1 and toks[i - 1] == b"," and after[:1] == [b"="]:
            return False
    return declared == 1


def _only_read(toks: list[bytes], name: bytes) -> bool:
    """Whether every use of the table ``name`` but its declaration reads one entry
    (``name[k]`` not followed by ``=``): then no call changes it."""
    declared, at = _uses(toks, name)
    for i in at:
        if toks[i + 1 : i + 2] != [b"["]:
            return False
        depth, j = 0, i + 1
        while j < len(toks):
            depth += {b"[": 1, b"]": -1}.get(toks[j], 0)
            if depth == 0:
                break
            j += 1
        if toks[j + 1 : j + 2] == [b"="]:
            return False
    return declared == 1


def tokens(code: bytes) -> list[bytes]:
    """The tokens of Lua code, without its comments (strings kept whole)."""
    return [m.group(0) for m in _TOKEN.finditer(code) if not m.group(0).startswith(b"--")]


def free_names(code: bytes) -> set[bytes]:
    """The names ``code`` (a function's text) uses without declaring them: not a field
    (after ``.`` or ``:``), not a table constructor's key, not a keyword, and not declared
    anywhere in it (a parameter, a ``local``, a ``for`` variable). Scopes are not told
    apart: a name declared in one block and read as an outer one in another is missed,
    which luacheck on the library then reports (tests/store/test_lua_lint.py)."""
    toks = tokens(code)
    declared: set[bytes] = set()
    used: set[bytes] = set()
    braces: list[bool] = []  # for each open bracket: whether it is a table constructor
    # what the next token may be: None, "decl" (a name being declared: after ``local``,
    # ``for``, a ',' between such names, a function's '('), "comma" (after a declared
    # name), "fname" (after ``function``: its name, if any, then its '(')
    state: str | None = None
    for i, tok in enumerate(toks):
        prev = toks[i - 1] if i else b""
        nxt = toks[i + 1] if i + 1 < len(toks) else b""
        is_name = re.fullmatch(rb"[A-Za-z_]\w*", tok) is not None and tok not in KEYWORDS
        if state == "fname":
            if is_name:
                declared.add(tok)
                continue
            if tok in (b".", b":"):
                continue
            state = "decl" if tok == b"(" else None
        elif state == "decl":
            if is_name or tok == b"...":
                declared.add(tok)
                state = "comma"
                continue
            state = None
        elif state == "comma":
            if tok == b",":
                state = "decl"
                continue
            state = None
        if tok in (b"local", b"for"):
            state = "decl"
        elif tok == b"function":
            state = "fname"
        elif tok in (b"{", b"(", b"["):
            braces.append(tok == b"{")
        elif tok in (b"}", b")", b"]"):
            if braces:
                braces.pop()
        elif not is_name or prev in (b".", b":"):
            pass  # a keyword, an operator, a literal or a field
        elif braces and braces[-1] and nxt == b"=" and prev in (b"{", b",", b";"):
            pass  # a key of a table constructor
        else:
            used.add(tok)
    return used - declared


@dataclass(frozen=True, slots=True)
class Library:
    name: str  #: the library's and its one function's name
    code: bytes  #: what FUNCTION LOAD takes
    hoisted: tuple[str, ...]  #: the names defined once, at load


def library(script: str, source: bytes) -> Library:
    """The Functions library of the script ``script`` (as EVAL would run it)."""
    shebang, _, body = source.partition(b"\n")
    flags = _FLAGS.fullmatch(shebang)
    if flags is None:
        raise RuntimeError(f"lua/{script}.lua: a shebang Redis Functions cannot take: {shebang!r}")
    top: list[tuple[int, int, bytes, bytes]] = []  # (start, end, name, kind)
    top += [(m.start(), m.end(), m.group(1), b"f") for m in _FUNCTION.finditer(body)]
    top += [(m.start(), m.end(), m.group(1), b"c") for m in _CONSTANT.finditer(body)]
    top += [(m.start(), m.end(), m.group(1), b"t") for m in _TABLE.finditer(body)]
    top.sort()
    toks = tokens(body)
    hoisted: list[tuple[int, int, bytes]] = []
    names: set[bytes] = set()
    for start, end, name, kind in top:
        text = body[start:end]
        if kind == b"f":
            movable = free_names(text) - {name} <= names | GLOBALS
        elif kind == b"c":
            movable = _never_assigned(toks, name)
        else:
            movable = free_names(text) <= names | GLOBALS and _only_read(toks, name)
        if movable:
            hoisted.append((start, end, name))
            names.add(name)
    outside, inside, at = [], [], 0
    prologue = []  # redis.call is not there while a library loads: bound by each call
    for start, end, hoisted_name in hoisted:
        inside.append(body[at:start])
        text = body[start:end]
        if re.match(rb"local \w+ = redis\.call\b", text):
            text = b"local " + hoisted_name + b"\n"
            prologue.append(b"  " + hoisted_name + b" = redis.call\n")
        outside.append(text)
        at = end
    inside.append(body[at:])
    digest = hashlib.sha1(source).hexdigest()[:16]
    fn = "shardsched_" + re.sub(r"\W", "_", script) + "_" + digest
    flag_list = b", ".join(b"'" + f + b"'" for f in (flags.group(1) or b"").split(b",") if f)
    code = b"".join(
        [
            b"#!lua name=" + fn.encode() + b"\n",
            *outside,
            b"local function main(KEYS, ARGV)\n",
            *prologue,
            *inside,
            b"\nend\n",
            b"redis.register_function{function_name='" + fn.encode() + b"',"
            b" callback=main, flags={" + flag_list + b"}}\n",
        ]
    )
    return Library(fn, code, tuple(n.decode() for _s, _e, n in hoisted))
