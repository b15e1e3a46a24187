"""Tests wait on events or deadlines, not on fixed sleeps (issue #49: fixed sleeps crept
back from 14 to 42 once the issue that removed them closed, 16 with no word on what they
waited for). Read from the test code's syntax tree:

- every sleep in real time carries a comment (on its line or the line above) saying what
  it waits out;
- at most :data:`MAX_FIXED` of them are *fixed*: a literal duration on a straight line,
  after which the test goes on whatever happened. A sleep inside a loop paces a poll that
  ends on a condition; a job handler's sleep is the job's work; a sleep under trio's
  autojump clock is virtual time. Those are not waits and are not counted.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MAX_FIXED = 25
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Sleep:
    where: str
    fixed: bool
    commented: bool


def _is_handler(fn: ast.AST) -> bool:
    """A job handler (``@handler(...)``, or taking a HandlerContext): its sleep is work."""
    if not isinstance(fn, _FUNCTIONS):
        return False
    if any("handler" in ast.unparse(d) for d in fn.decorator_list):
        return True
    args = [*fn.args.args, *fn.args.kwonlyargs]
    return any(
        a.annotation is not None and "HandlerContext" in ast.unparse(a.annotation) for a in args
    )


def _virtual_time(tree: ast.Module) -> bool:
    """Every test of the module runs on trio's autojump clock: its sleeps cost nothing."""
    tests = [n for n in tree.body if isinstance(n, _FUNCTIONS) and n.name.startswith("test_")]
    return bool(tests) and all(
        any(a.arg == "autojump_clock" for a in t.args.args + t.args.kwonlyargs) for t in tests
    )


def sleeps_in(path: Path, root: Path = TESTS) -> list[Sleep]:
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    if _virtual_time(tree):
        return []
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", None))
        if name != "sleep":
            continue
        ancestors, up = [], node
        while up in parent:
            up = parent[up]
            ancestors.append(up)
        if any(_is_handler(a) for a in ancestors):
            continue
        # a loop between the sleep and its function paces a poll
        inner = next((i for i, a in enumerate(ancestors) if isinstance(a, _FUNCTIONS)), None)
        in_loop = any(isinstance(a, _LOOPS) for a in ancestors[:inner])
        line = lines[node.lineno - 1]
        above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
        commented = "#" in line[node.col_offset :] or above.startswith("#")
        literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
        where = f"{path.relative_to(root)}:{node.lineno}"
        found.append(Sleep(where, fixed=literal and not in_loop, commented=commented))
    return found


def all_sleeps() -> list[Sleep]:
    return [s for path in sorted(TESTS.rglob("*.py")) for s in sleeps_in(path)]


def test_every_sleep_says_what_it_waits_out() -> None:
    assert [s.where for s in all_sleeps() if not s.commented] == []


def test_fixed_sleeps_stay_few() -> None:
    fixed = [s.where for s in all_sleeps() if s.fixed]
    assert len(fixed) <= MAX_FIXED, "\n".join(fixed)


def test_the_reading_sees_what_it_should(tmp_path: Path) -> None:
    """The rule is not vacuous: a bare fixed sleep is found, and the exemptions hold."""
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import time, trio\n"
        "async def test_a():\n"
        "    await trio.sleep(2)\n"
        "    # waits out the owner's next round\n"
        "    await trio.sleep(1)\n"
        "    while True:\n"
        "        await trio.sleep(0.1)  # the poll's pace\n"
        "@handler('x')\n"
        "async def work(ctx):\n"
        "    await trio.sleep(5)\n"
    )
    got = {s.where: (s.fixed, s.commented) for s in sleeps_in(sample, tmp_path)}
    assert got == {
        "test_sample.py:3": (True, False),  # fixed, and says nothing
        "test_sample.py:5": (True, True),  # fixed, says why on the line above
        "test_sample.py:7": (False, True),  # a poll's pace
    }  # the handler's sleep is its work: not listed
