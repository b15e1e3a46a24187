"""What text that people read may hold: names, pause and cancel reasons.

It is shown in tables, logs, the console and notifications, so it must look like what it
is: no control characters (C0, DEL, C1: a NUL, an ESC that starts a terminal sequence, a
newline that forges a log line) and no invisible format characters (zero-width,
bidirectional overrides such as U+202E, BOM).
"""

from __future__ import annotations

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


#: Every invisible format character (category Cf) of the Unicode database of Python 3.11
#: (Unicode 14.0): soft hyphen, zero-width ones, bidirectional overrides, BOM, interlinear
#: annotations, the tag characters that smuggle text past a reader. Written out rather
#: than computed: walking all 1.1M code points cost every process 160 ms at import.
#: tests/core/test_text.py checks it against the running Python's database.
FORMAT_CHARACTERS: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)  # fmt: skip
#: Control characters (C0, DEL, C1), the format characters above, the line and
#: paragraph separators, and the characters that render as nothing (Hangul fillers, the
#: combining grapheme joiner).
UNPRINTABLE = _class_of(
    [
        *range(0x00, 0x20),
        *range(0x7F, 0xA0),
        *(cp for first, last in FORMAT_CHARACTERS for cp in range(first, last + 1)),
        0x2028, 0x2029, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0,
    ]
)  # fmt: skip
#: To the very end: Python's ``$`` also matches before a trailing newline, ``(?!\n)`` not.
PRINTABLE = f"^[^{UNPRINTABLE}]*$(?!\n)"
#: Why a run was cancelled or a job paused: one printable line.
Reason = Annotated[str, msgspec.Meta(max_length=500, pattern=PRINTABLE)]
