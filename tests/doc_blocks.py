"""A docs page's worked examples, as the tests that execute them read them: its fenced
blocks by kind and name (```` ```console listen ````), and a console block's commands
with the output lines the page prints after each."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def blocks(page: str, kind: str) -> dict[str, str]:
    text = (DOCS / page).read_text()
    return {
        m.group(1).strip(): m.group(2)
        for m in re.finditer(rf"```{kind} ([^\n]*)\n(.*?)```", text, re.DOTALL)
    }


def commands(block: str) -> list[tuple[str, list[str]]]:
    """Each ``$ command`` and the output lines the page prints after it."""
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            out.append((line[2:], []))
        else:
            out[-1][1].append(line)
    return out
