"""A process frozen at start-up (runtime/heap.py): once ready, the objects its imports made
are out of the garbage collector's way, so a full collection walks only what came after
(a node's fell from 35-48 ms to 2-3 ms on the fleet bench)."""

from __future__ import annotations

import subprocess
import sys

from conftest import child_env

PROGRAM = """
import gc, trio
from shardsched.runtime import lifetime

async def main(*, task_status):
    task_status.started(None)

lifetime.run_until_signal(main, lambda _: f"ready {gc.get_freeze_count()}")
"""


def test_a_process_is_frozen_once_ready_and_a_full_collection_is_short() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=child_env(), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    frozen = int(done.stdout.split()[-1])
    assert frozen > 20_000, f"only {frozen} objects frozen: was gc.freeze called once ready?"


def test_a_full_collection_skips_the_frozen() -> None:
    probe = """
import gc, time
import shardsched.service  # the imports a node makes
from shardsched.runtime.heap import freeze_startup
def full():
    t = time.perf_counter(); gc.collect(); return time.perf_counter() - t
before = min(full() for _ in range(3))
freeze_startup()
after = min(full() for _ in range(3))
print(before, after)
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], env=child_env(), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    before, after = (float(x) for x in done.stdout.split())
    assert after < before / 4, (before, after)
