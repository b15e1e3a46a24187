"""The architecture holds (ARCHITECTURE.md): the import layers (import-linter's contracts
in pyproject.toml), no module past ~400 lines, and every module saying why it exists."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "shardsched"
MAX_LINES = 400


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "__main__.py")


def test_import_layers() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint is None:
        pytest.fail("lint-imports (import-linter) is not installed: bash scripts/setup.sh")
    done = subprocess.run(
        [lint, "--no-cache"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_module_is_small_and_says_why(path: Path) -> None:
    text = path.read_text()
    lines = text.count("\n")
    assert lines <= MAX_LINES, f"{lines} lines: split it (one concept per module)"
    if path.name != "__init__.py" or text.strip():
        assert ast.get_docstring(ast.parse(text)), "no module docstring saying why it exists"


_SDK_TYPES = """
from collections.abc import Coroutine
from typing import Any, assert_type

from shardsched import AsyncClient, Client, Job, JobSpec
from shardsched.core.views import JobCreated


async def use(a: AsyncClient, c: Client, spec: JobSpec) -> None:
    assert_type(c.get_job("j"), Job)
    assert_type(c.add_job(spec), JobCreated)
    pending = a.get_job("j")
    _ = assert_type(pending, Coroutine[Any, Any, Job])
    assert_type(await pending, Job)
    assert_type(await a.add_job(spec), JobCreated)
"""


def test_sdk_types_are_honest(tmp_path: Path) -> None:
    """The async client's methods are typed as coroutines of what the sync one returns."""
    snippet = tmp_path / "sdk_types.py"
    snippet.write_text(_SDK_TYPES)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_the_consoles_modules_import_no_cycle() -> None:
    """app.js (the shell), views.js and charts.js share lib.js; none imports a module that
    imports it back (a cycle works only while no module uses another's value at load)."""
    ui = SRC / "router" / "assets" / "ui"
    imports = {
        path.name: set(re.findall(r'^import .* from "\./([\w.]+)";', path.read_text(), re.M))
        for path in ui.glob("*.js")
    }
    assert imports["lib.js"] == set(), "lib.js is the leaf every screen shares"

    def reaches(start: str, seen: frozenset[str] = frozenset()) -> None:
        for nxt in imports.get(start, ()):
            assert nxt not in seen | {start}, f"import cycle through {start} -> {nxt}"
            reaches(nxt, seen | {start})

    for module in imports:
        reaches(module)
    assert imports["app.js"] >= {"lib.js", "views.js"}
