"""Each script as a Redis Functions library (store/functions.py): what moves to the
library's top level (defined once, at load) and what stays in the call. That nothing
moved reads a name of the call is luacheck's to say (test_lua_lint.py); here, that
nothing kept from one call to the next can change, and that Redis takes every library."""

from __future__ import annotations

import subprocess

from conftest import RedisServer
from shardsched.store.functions import free_names, library
from shardsched.store.scripts import SCRIPTS


def hoisted(body: str) -> tuple[str, ...]:
    """What moves out of ``body`` (the scripts' layout: a function's ``end`` at the start
    of a line)."""
    return library("t", b"#!lua\n" + body.encode()).hoisted


def test_free_names_leave_out_fields_keys_locals_and_parameters() -> None:
    code = b"""local function f(a, b)
  local x, y = 1, {k = a, [b] = 2, c}
  for i, v in ipairs(y) do rcall('X', v, i, base .. 'x') end
  local g = function(q, ...) return q + z end
  return x.foo + t:bar(w) -- not_a_name 'nor this'
end"""
    assert free_names(code) == {b"ipairs", b"rcall", b"base", b"c", b"z", b"t", b"w"}


def test_only_what_no_call_can_change_moves_out() -> None:
    got = hoisted(
        "local rcall = redis.call\n"
        "local KEPT = '100'\n"
        "local n = 0\n"  # counted per call: stays
        "local T = {a = true}\n"
        "local U = {b = true}\n"
        "local base = ARGV[1]\n"
        "local function pure(x)\n  return rcall('GET', x .. KEPT)\nend\n"
        "local function reads_t(x)\n  return T[x]\nend\n"
        "local function uses_base(x)\n  return base .. x\nend\n"  # a name of the call
        "local function counts()\n  n = n + 1\nend\n"
        "local function calls_one_that_stays()\n  return uses_base('x')\nend\n"
        "U['c'] = true\n"  # written: stays
        "return pure(base)\n"
    )
    assert got == ("rcall", "KEPT", "T", "pure", "reads_t")


def test_redis_call_is_bound_by_each_call_not_at_load() -> None:
    code = library("t", b"#!lua flags=allow-oom\nlocal rcall = redis.call\nreturn rcall('PING')\n")
    text = code.code.decode()
    assert text.startswith(f"#!lua name={code.name}\nlocal rcall\n")
    assert "local function main(KEYS, ARGV)\n  rcall = redis.call\n" in text
    assert "flags={'allow-oom'}" in text


def test_every_library_loads_and_runs(redis_server: RedisServer) -> None:
    loaded = subprocess.run(
        ["redis-cli", "-p", str(redis_server.port), "-x", "FUNCTION", "LOAD", "REPLACE"],
        input=SCRIPTS["acquire_lease"].library,
        capture_output=True,
        check=True,
    )
    assert loaded.stdout.strip().decode() == SCRIPTS["acquire_lease"].function
    names = {s.function for s in SCRIPTS.values()}
    assert len(names) == len(SCRIPTS)  # one library, one function, per script
    for script in SCRIPTS.values():
        done = subprocess.run(
            ["redis-cli", "-p", str(redis_server.port), "-x", "FUNCTION", "LOAD", "REPLACE"],
            input=script.library,
            capture_output=True,
        )
        assert done.stdout.strip().decode() == script.function, (script.name, done.stdout)
