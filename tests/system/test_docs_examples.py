"""The worked examples of the README and docs/ outside the tour, executed: every
```python example``` block of each page, in order, each in a fresh namespace of its own
with ``client`` a :class:`shardsched.Client` on a real Redis and ``redis`` a redis-py
client on it (and a node and worker running for those that need runs), so each example
stays true as printed. A block fenced ```python example slow``` runs in CI's slow step."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import redis as redis_py
import trio

from shardsched import Client

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: (page, its n-th example, the code, slow?); a block may sit in a list item: indented,
#: as its fence is
BLOCKS = [
    (page.relative_to(ROOT), n, textwrap.dedent(code), bool(slow))
    for page in PAGES
    for n, (slow, code) in enumerate(
        re.findall(r"```python example( slow)?\n(.*?)^ *```", page.read_text(), re.DOTALL | re.M)
    )
]


def test_the_pages_have_examples() -> None:
    assert len(BLOCKS) >= 10
    assert any(str(page) == "README.md" for page, *_ in BLOCKS), "the README's ten lines"


@pytest.mark.parametrize(
    "n",
    [
        pytest.param(i, marks=[pytest.mark.slow] if slow else [], id=f"{page}-{n + 1}")
        for i, (page, n, _, slow) in enumerate(BLOCKS)
    ],
)
async def test_example(n: int, node, worker, redis_server, dep) -> None:
    client = await trio.to_thread.run_sync(Client, redis_server.url, dep.namespace)
    raw = redis_py.Redis.from_url(redis_server.url)
    try:
        page, k, text, _ = BLOCKS[n]
        code = compile(text, f"{page} example {k + 1}", "exec")
        await trio.to_thread.run_sync(exec, code, {"client": client, "redis": raw})
    finally:
        client.close()
        raw.close()
