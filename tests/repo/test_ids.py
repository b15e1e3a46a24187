"""Ids are read only through core/ids (and store/keys.owner_id over it): a run id, a DAG
run id or a record id split by hand somewhere else is how the two styles of the same
grammar drifted apart (issue #49). This walks every module's syntax tree for a
``split``/``rsplit``/``partition``/``rpartition`` on ``":"`` or ``"."`` of something
named like an id."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "shardsched"
#: The grammar's own home.
HOME = {SRC / "core" / "ids.py"}
_SPLITS = {"split", "rsplit", "partition", "rpartition"}
_ID_NAME = re.compile(r"(^|_)(r|dr)?id$|run_id|dag_run|record_id|^rid|^drid")


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return _name(node.func.value) if node.func.attr in ("decode", "strip") else ""
    return ""


def hand_splits(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in _SPLITS or not node.args:
            continue
        sep = node.args[0]
        if not (isinstance(sep, ast.Constant) and sep.value in (":", ".")):
            continue
        if _ID_NAME.search(_name(node.func.value)):
            found.append(node.lineno)
    return found


def test_no_module_splits_an_id_by_hand() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path in HOME:
            continue
        for line in hand_splits(ast.parse(path.read_text())):
            offenders.append(f"{path.relative_to(SRC)}:{line}")
    assert not offenders, f"use core/ids to read an id: {offenders}"


def test_the_walk_finds_a_hand_split() -> None:
    """The check itself: each way an id was split by hand before is caught."""
    for code in (
        'dag_id = drid.split(":", 1)[0]',
        'k.is_dag_id(rid.split(":", 1)[0])',
        'dag = run.dag_run_id.split(":", 1)[0]',
        'tick = record.record_id.rpartition(":")[2]',
        'dag = run_id.split(".", 1)[0]',
        'job, _, rest = rid.decode().partition(":")',
    ):
        assert hand_splits(ast.parse(code)), code
    assert not hand_splits(ast.parse('host, _, port = bind.rpartition(":")'))
