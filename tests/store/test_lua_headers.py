"""Every Lua script has one typed wrapper, and the wrapper's KEYS and ARGV agree with the
script's header (pure: reads lua/ and the wrappers, no Redis)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shardsched.store.lua import all_signatures
from shardsched.store.scripts import FENCED, FENCED_PREFIX, SCRIPTS

#: The scripts of lua/ (each fenced variant is one of them behind lua/lib/fence.lua).
OWN = sorted(name for name in SCRIPTS if not name.startswith(FENCED_PREFIX))

_KEY = re.compile(r"^  KEYS\[(\d+)\] +(\S+)", re.MULTILINE)
_ARG = re.compile(r"^  ARGV\[(\d+)\]", re.MULTILINE)
_ITEMS = re.compile(r"^  ARGV\[(\d+)\.\.\] (?:items of (\d+)|(.*))", re.MULTILINE)


def _header(name: str) -> str:
    source = SCRIPTS[name].source.decode()
    return source[source.index("--[[") : source.index("]]")]


def test_every_script_has_one_wrapper() -> None:
    assert sorted(all_signatures()) == OWN


@pytest.mark.parametrize("name", OWN)
def test_wrapper_matches_header(name: str) -> None:
    header, sig = _header(name), all_signatures()[name]
    keys = [(int(i), key) for i, key in _KEY.findall(header)]
    assert [i for i, _ in keys] == list(range(1, len(keys) + 1)), "KEYS numbered 1..n"
    assert tuple(key for _, key in keys) == sig.keys
    fixed = [int(i) for i in _ARG.findall(header)]
    assert fixed == list(range(1, len(fixed) + 1)), "ARGV numbered 1..n"
    assert len(fixed) == len(sig.argv), f"{name}: ARGV {len(fixed)} in the header"
    items = _ITEMS.findall(header)
    if not items:
        assert sig.item == ()
        return
    ((start, width, _plain),) = items
    assert int(start) == len(fixed) + 1
    assert len(sig.item) == (int(width) if width else 1)


def test_lua_builds_no_keys_from_argv_but_the_base() -> None:
    """A key built inside a script comes from the shard key base (the header says so), so
    it carries the shard's hash tag; no other ARGV is concatenated into a key."""
    for name in OWN:
        for line in SCRIPTS[name].source.decode().splitlines():
            for m in re.finditer(r"ARGV\[(\d+)\] \.\. '[a-z_]+:?'", line):
                arg = int(m.group(1)) - 1
                assert all_signatures()[name].argv[arg] == "base", f"{name}: {line.strip()}"


def test_every_key_a_script_builds_is_named_in_keys_py() -> None:
    """Keys built inside scripts (``base .. 'run:' .. id``) are the shard's own keys, each
    named in store/keys.py, so Python and Lua agree on where everything lives."""
    store = Path(__file__).resolve().parents[2] / "src/shardsched/store"
    files = ("keys.py", "notify_keys.py", "watch_keys.py", "ck_keys.py", "calendar_keys.py")
    keys_py = "".join((store / f).read_text() for f in files)
    named = set(re.findall(r'self\.base \+ "([a-z_]+:?)"', keys_py))
    lua = Path(__file__).resolve().parents[2] / "lua"
    built: set[str] = set()
    for path in [*lua.glob("*.lua"), *lua.glob("lib/*.lua")]:
        built |= set(re.findall(r"base \.\. '([a-z_]+:?)'", path.read_text()))
    assert built, "no key built from the base found: is the pattern stale?"
    assert built <= named, f"built in Lua but not named in keys.py: {built - named}"


def test_every_key_a_script_builds_is_in_its_header() -> None:
    """A script's header names every key it builds from the shard's base itself; a lib/
    helper's leading comment names the keys it builds, once, for every script that
    includes it (store/scripts.py inlines it)."""
    lua = Path(__file__).resolve().parents[2] / "lua"
    built_in = re.compile(r"base \.\. '([a-z_]+:?)'")
    for path in sorted(lua.glob("*.lua")):
        source = path.read_text()
        header = source[source.index("--[[") : source.index("]]")]
        missing = sorted(b for b in set(built_in.findall(source)) if b not in header)
        assert not missing, f"lua/{path.name} builds {missing} without naming them"
    for path in sorted(lua.glob("lib/*.lua")):
        source = path.read_text()
        comment = "\n".join(line for line in source.splitlines() if line.startswith("--"))
        missing = sorted(b for b in set(built_in.findall(source)) if b not in comment)
        assert not missing, f"lua/lib/{path.name} builds {missing} without naming them"


def test_a_helper_is_inlined_once_with_what_it_includes() -> None:
    """Includes are recursive: a helper names the helpers it calls, and each is inlined
    once per script, before what calls it; a cycle is refused at load."""
    lua = Path(__file__).resolve().parents[2] / "lua"
    for name, script in SCRIPTS.items():
        source = script.source.decode()
        defined = re.findall(r"^local function (\w+)", source, re.MULTILINE)
        assert len(defined) == len(set(defined)), f"{name}: a helper inlined twice"
        assert "-- @include" not in source, f"{name}: an include left unresolved"
        first = {f: source.index(f"local function {f}(") for f in defined}
        for f, at in first.items():
            called = re.search(rf"(?<!function )\b{f}\(", source)
            assert called is None or called.start() > at, f"{name}: {f} called before it is"
    included = {p.stem: set(re.findall(r"^-- @include (\w+)$", p.read_text(), re.M))
                for p in lua.glob("lib/*.lua")}  # fmt: skip
    assert included["dag"] >= {"events", "queues", "counters", "skips"}


def test_includes_resolve_once_refuse_a_cycle_and_unreached_functions_go(
    tmp_path: Path,
) -> None:
    """store/scripts.py on a library of its own: ``a`` calls ``b``; a script including
    both gets ``b`` once, before ``a``; ``c`` it never calls is dropped; ``x``/``y``
    include each other and are refused."""
    from shardsched.store import scripts

    (tmp_path / "a.lua").write_text("-- @include b\nlocal function a()\n  return b()\nend\n")
    (tmp_path / "b.lua").write_text("local function b()\n  return 1\nend\n")
    (tmp_path / "c.lua").write_text("local function c()\n  return 2\nend\n")
    (tmp_path / "x.lua").write_text("-- @include y\n")
    (tmp_path / "y.lua").write_text("-- @include x\n")
    source = b"#!lua\n-- @include a\n-- @include b\n-- @include c\nreturn a()\n"
    inlined = scripts._shake(scripts._inline(source, tmp_path, set(), ()))
    text = inlined.decode()
    assert text.count("local function b(") == 1
    assert text.index("local function b(") < text.index("local function a(")
    assert "local function c(" not in text and text.endswith("return a()\n")
    with pytest.raises(RuntimeError, match="cycle: x -> y -> x"):
        scripts._inline(b"-- @include x\n", tmp_path, set(), ())


def test_a_fenced_variant_is_its_script_behind_the_fence() -> None:
    """``fenced:<name>`` runs lua/lib/fence.lua first and then exactly the script as
    written (with the shebang's flags), so a deploy's writes behave as a PUT's."""
    fence = (Path(__file__).resolve().parents[2] / "lua/lib/fence.lua").read_text().rstrip()
    for name in FENCED:
        plain = SCRIPTS[name].source.decode()
        variant = SCRIPTS[FENCED_PREFIX + name].source.decode()
        shebang, _, body = plain.partition("\n")
        assert variant == f"{shebang}\n{fence}\n{body}", name
