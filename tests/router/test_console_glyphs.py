"""Every state glyph the console draws is in DejaVu Sans, the font a bare Debian desktop
(and Debian's chromium) has: a glyph outside it shows as an empty box (the "⏰ late" mark
did). Checked against the installed fonts by fontconfig, not a list of our own."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

LIB = Path(__file__).parents[2] / "src/shardsched/router/assets/ui/lib.js"


def _shapes() -> dict[str, str]:
    block = LIB.read_text().split("export const SHAPES = {", 1)[1].split("};", 1)[0]
    return dict(re.findall(r'(\w+): "([^"]+)"', block))


def test_the_shapes_table_is_read() -> None:
    shapes = _shapes()
    assert len(shapes) >= 15 and shapes["succeeded"] == "✓" and shapes["late"]


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig (setup.sh --tests)")
def test_every_state_glyph_is_in_dejavu_sans() -> None:
    missing = []
    for state, glyph in _shapes().items():
        for char in glyph:
            families = subprocess.run(
                ["fc-list", f":charset={ord(char):x}", "family"],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            if "DejaVu Sans" not in families:
                missing.append(f"{state}: {char} U+{ord(char):04X}")
    assert not missing, missing
