"""One typed wrapper per Lua script: the only code that knows a script's KEYS and ARGV.

Each wrapper module declares, per script, a :class:`Signature` (the KEYS names and the
ARGV fields in order, as the script's header lists them; ``tests/store/test_lua_headers.py``
checks the two agree), a function that builds its :class:`~shardsched.store.calls.Call`
from typed arguments, a decoder for its reply, and its return codes as an IntEnum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from shardsched.store.calls import Call

SIGNATURES: dict[str, Signature] = {}


@dataclass(frozen=True, slots=True)
class Signature:
    """A script's calling convention: KEYS names, fixed ARGV fields, repeated items."""

    script: str
    keys: tuple[str, ...]
    argv: tuple[str, ...]
    #: the fields of each repeated ARGV item after the fixed ones (empty: none; one field
    #: named "*": a plain list of values)
    item: tuple[str, ...] = ()

    def call(self, keys: Sequence[str], args: Sequence[Any], items: Sequence[Any] = ()) -> Call:
        """The Call for these KEYS and fixed ARGV, then ``items`` (already flattened)."""
        if len(keys) != len(self.keys) or len(args) != len(self.argv):
            raise TypeError(f"{self.script}: {len(keys)} keys, {len(args)} args")
        return Call((*args, *items), script=self.script, keys=tuple(keys))


def signature(
    script: str, keys: Sequence[str], argv: Sequence[str], item: Sequence[str] = ()
) -> Signature:
    """Declare a script's signature (once per script)."""
    if script in SIGNATURES:
        raise RuntimeError(f"lua/{script}.lua has two wrappers")
    sig = SIGNATURES[script] = Signature(script, tuple(keys), tuple(argv), tuple(item))
    return sig


def all_signatures() -> dict[str, Signature]:
    """Every script's signature (imports every wrapper module)."""
    from shardsched.store.lua import (  # noqa: F401
        apps,
        concurrency,
        dags,
        events,
        firing,
        jobs,
        leases,
        liveness,
        notify,
        recovery,
        retention,
        runs,
        tokens,
    )

    return dict(SIGNATURES)
