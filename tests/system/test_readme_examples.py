"""The README's worked examples outside the tour, executed: every ```python example```
block, in order, each in a fresh namespace of its own with ``client`` a
:class:`shardsched.Client` on a real Redis and ``redis`` a redis-py client on it (and a
node and worker running for those that need runs), so each example stays true as
printed. A block fenced ```python example slow``` runs in CI's slow step."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import redis as redis_py
import trio

from shardsched import Client

README = Path(__file__).resolve().parents[2] / "README.md"
#: a block may sit in a list item: indented, as its fence is
BLOCKS = [
    (textwrap.dedent(code), bool(slow))
    for slow, code in re.findall(
        r"```python example( slow)?\n(.*?)^ *```", README.read_text(), re.DOTALL | re.M
    )
]


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize(
    "n",
    [
        pytest.param(n, marks=[pytest.mark.slow] if slow else [])
        for n, (_, slow) in enumerate(BLOCKS)
    ],
)
async def test_readme_example(n: int, node, worker, redis_server, dep) -> None:
    client = await trio.to_thread.run_sync(Client, redis_server.url, dep.namespace)
    raw = redis_py.Redis.from_url(redis_server.url)
    try:
        code = compile(BLOCKS[n][0], f"README.md example {n + 1}", "exec")
        await trio.to_thread.run_sync(exec, code, {"client": client, "redis": raw})
    finally:
        client.close()
        raw.close()
