"""core/text's written-out table of format characters against the Unicode database of
the Python running the tests (a different Python may know more of them: this test then
names the ones missing), and the printable-text rule on a character of each kind."""

from __future__ import annotations

import re
import sys
import unicodedata

import msgspec
import pytest

from shardsched.core.text import FORMAT_CHARACTERS, UNPRINTABLE, Reason


def test_the_table_is_every_format_character_of_this_pythons_unicode_database() -> None:
    database = {cp for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)) == "Cf"}
    table = {cp for first, last in FORMAT_CHARACTERS for cp in range(first, last + 1)}
    assert sorted(database - table) == [], "format characters the table lacks"
    assert sorted(table - database) == [], "table entries that are not format characters"


@pytest.mark.parametrize(
    "bad", ["\x00", "\x1b[31m", "a\nb", "ab\n", "\x7f", "\x85", "\u202e", "\u200b", "\ufeff",
            "\U000e0041", "\u2028", "\u3164", "\u034f"],
)  # fmt: skip
def test_unprintable_characters_are_refused(bad: str) -> None:
    assert re.search(f"[{UNPRINTABLE}]", bad)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(f"x{bad}y", Reason)


@pytest.mark.parametrize("good", ["maintenance window", "café ☕", "日本語", "a-b_c.d", "ü\u0301"])
def test_printable_text_passes(good: str) -> None:
    assert msgspec.convert(good, Reason) == good
