"""Every script as Redis runs it (lib/ helpers inlined, store/scripts.py) passes luacheck:
no global read or written but Redis's own (a local out of scope reads as a global nil,
which is how a retry once lost its job), no shadowed or unreachable code. luacheck
(Debian's lua-check) is installed by ``scripts/setup.sh --tests``."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from shardsched.store.scripts import SCRIPTS

#: What Redis's Lua 5.1 gives a script beyond the standard library.
REDIS_GLOBALS = ["redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct"]


def luacheck_files(files: dict[str, bytes], where: Path, read_globals: list[str]) -> str:
    """luacheck over ``files`` (name -> text) written to ``where``: its complaints."""
    luacheck = shutil.which("luacheck")
    assert luacheck, "luacheck is missing: run bash scripts/setup.sh --tests"
    for name, text in files.items():
        (where / f"{name.replace(':', '_')}.lua").write_bytes(text)
    args = ["--std", "lua51", "--read-globals", *read_globals]
    args += ["--no-unused", "--no-redefined", "--no-max-line-length", "--codes"]
    done = subprocess.run(
        [luacheck, str(where), *args, "--formatter", "plain"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_every_script_passes_luacheck(tmp_path: Path) -> None:
    sources = {name: script.source for name, script in SCRIPTS.items()}
    assert not luacheck_files(sources, tmp_path, REDIS_GLOBALS)


def test_every_library_passes_luacheck_without_keys_or_argv(tmp_path: Path) -> None:
    """What Redis is given: each script's Functions library (store/functions.py). A helper
    moved to the library's top level that reads a name of ``main``'s (KEYS, ARGV, a
    local of the call) reads an undefined global there: the check that the move is
    right does not share the reading (store/functions.free_names) that made it."""
    libraries = {name: s.library.split(b"\n", 1)[1] for name, s in SCRIPTS.items()}
    no_keys = [g for g in REDIS_GLOBALS if g not in ("KEYS", "ARGV")]
    assert not luacheck_files(libraries, tmp_path, no_keys)


def test_luacheck_sees_a_helper_moved_out_that_reads_the_call(tmp_path: Path) -> None:
    """The check itself: a library whose top-level helper reads ``base`` (a local of the
    call, as lib/ helpers' callers have) is refused."""
    lib = (
        b"local function key(x)\n  return base .. x\nend\n"
        b"local function main(KEYS, ARGV)\n  local base = ARGV[1]\n  return key(base)\nend\n"
        b"redis.register_function{function_name='t', callback=main}\n"
    )
    no_keys = [g for g in REDIS_GLOBALS if g not in ("KEYS", "ARGV")]
    assert "undefined variable 'base'" in luacheck_files({"t": lib}, tmp_path, no_keys)


def test_luacheck_finds_a_local_read_out_of_its_scope(tmp_path: Path) -> None:
    """The check itself: the slip it is here for is caught."""
    luacheck = shutil.which("luacheck")
    assert luacheck
    (tmp_path / "slip.lua").write_text(
        "if ARGV[1] then\n  local job = ARGV[1]\nend\nredis.call('DEL', job)\n"
    )
    done = subprocess.run(
        [
            luacheck,
            str(tmp_path),
            "--formatter",
            "plain",
            "--std",
            "lua51",
            "--read-globals",
            *REDIS_GLOBALS,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "undefined variable 'job'" in done.stdout
