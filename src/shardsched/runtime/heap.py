"""A long-running process's heap: what start-up made is moved out of the collector's way.

CPython's full collection walks every object it tracks. A node's start-up (trio, redis,
starlette, hypercorn, msgspec, prometheus-client) leaves a few hundred thousand
objects that live as long as the process, and walking them took a node 35-48 ms every
6 s or so on the fleet bench: a pause that every tick due in it waited out (the trigger
lag's p99). Frozen once the process is ready (``gc.freeze``), they are never walked
again; the collector only sees what was made since.
"""

from __future__ import annotations

import gc


def freeze_startup() -> None:
    """Collect once, then freeze every surviving object (call once, when ready)."""
    gc.collect()
    gc.freeze()
