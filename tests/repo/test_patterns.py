"""Every anchored pattern in src/ ends with ``$(?!\\n)``: Python's ``$`` also matches
before a trailing newline, so ``^[a-z]+$`` let ``"name\\n"`` through (a worker id with a
newline was accepted by the worker protocol: an independent tester's find). ``(?!\\n)``
says "the very end" in Python and in JSON Schema (the OpenAPI document) alike."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "shardsched"
#: a string literal opening with ^ and closing with a bare $, given to re.compile or to a
#: msgspec.Meta pattern
BARE_END = re.compile(r'(?:re\.compile\(|pattern=)r?f?r?"\^[^"\n]*(?<!\(\?!\\n\))\$"')


def test_no_anchored_pattern_ends_with_a_bare_dollar() -> None:
    found = [
        f"{path.relative_to(SRC)}:{text[: m.start()].count(chr(10)) + 1}: {m.group()}"
        for path in sorted(SRC.rglob("*.py"))
        for text in [path.read_text()]
        for m in BARE_END.finditer(text)
    ]
    assert not found, "\n".join(found)


def test_the_rule_catches_what_it_should() -> None:
    assert BARE_END.search('X = re.compile(r"^[a-z]+$")')
    assert BARE_END.search('msgspec.Meta(pattern=r"^[a-z]+$")')
    assert not BARE_END.search('X = re.compile(r"^[a-z]+$(?!\\n)")')
