"""What text that people read may hold: names, pause and cancel reasons.

It is shown in tables, logs, the console and notifications, so it must look like what it
is: no control characters (C0, DEL, C1: a NUL, an ESC that starts a terminal sequence, a
newline that forges a log line) and no invisible format characters (zero-width,
bidirectional overrides such as U+202E, BOM).
"""

from __future__ import annotations

import sys
import unicodedata
from typing import Annotated

import msgspec


def _class_of(code_points: list[int]) -> str:
    """A regex character class body of the code points, as ranges."""
    out: list[str] = []
    first = last = -2
    for cp in [*sorted(code_points), -1]:
        if cp == last + 1:
            last = cp
            continue
        if first >= 0:
            out.append(_escape(first) + ("-" + _escape(last) if last > first else ""))
        first = last = cp
    return "".join(out)


def _escape(cp: int) -> str:
    # the character itself, as the pattern held it before: none of them is special in a
    # class (no "]", "\\", "^" or "-"), and msgspec's error message then shows it escaped
    return chr(cp)


#: Control characters (C0, DEL, C1), every invisible format character of the Unicode
#: database (category Cf: soft hyphen, zero-width ones, bidirectional overrides, BOM,
#: interlinear annotations, the tag characters that smuggle text past a reader), the line
#: and paragraph separators, and the characters that render as nothing (Hangul fillers,
#: the combining grapheme joiner).
UNPRINTABLE = _class_of(
    [
        *range(0x00, 0x20),
        *range(0x7F, 0xA0),
        *(cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"),
        0x2028, 0x2029, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0,
    ]
)  # fmt: skip
PRINTABLE = f"^[^{UNPRINTABLE}]*$"
#: Why a run was cancelled or a job paused: one printable line.
Reason = Annotated[str, msgspec.Meta(max_length=500, pattern=PRINTABLE)]
