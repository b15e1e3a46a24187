"""The README's worked examples outside the tour, executed: every ```python example```
block, in order, each in a fresh namespace of its own with ``client`` a
:class:`shardsched.Client` on a real Redis (and a node and worker running for those that
need runs), so each example stays true as printed."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import trio

from shardsched import Client

README = Path(__file__).resolve().parents[2] / "README.md"
#: a block may sit in a list item: indented, as its fence is
BLOCKS = [
    textwrap.dedent(code)
    for code in re.findall(r"```python example\n(.*?)^ *```", README.read_text(), re.DOTALL | re.M)
]


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize("n", range(len(BLOCKS)))
async def test_readme_example(n: int, node, worker, redis_server, dep) -> None:
    client = await trio.to_thread.run_sync(Client, redis_server.url, dep.namespace)
    try:
        code = compile(BLOCKS[n], f"README.md example {n + 1}", "exec")
        await trio.to_thread.run_sync(exec, code, {"client": client})
    finally:
        client.close()
