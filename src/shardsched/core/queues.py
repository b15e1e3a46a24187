"""Queues: which workers may run a job. A job (or a DAG task) names one; a worker serves
a list of them (``shardsched worker --queues gpu,default``) and claims nothing else.

Each shard keeps one ready stream per queue (store/keys.py): the default queue's is the
shard's ``ready`` stream of before queues existed, so a deployment that names none runs
exactly as it did. A run records its queue (``q`` on its record, only when not the
default), so its retries, reclaims and hand-backs stay on it even if the job moves.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from shardsched.core.errors import ValidationError

DEFAULT_QUEUE = "default"
#: Lower-case letters, digits, '_' and '-': part of Redis key names and metric labels.
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
QueueName = Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=QUEUE_NAME.pattern)]
#: The most queues one worker serves (each is a stream read in each of its claims).
MAX_WORKER_QUEUES = 16


def stored(queue: str) -> str:
    """A queue as run records, job hashes and scripts carry it: '' for the default."""
    return "" if queue == DEFAULT_QUEUE else queue


def parse_queues(text: str, field: str = "--queues") -> tuple[str, ...]:
    """``gpu,default`` as ("gpu", "default"): the order is the order a worker claims in."""
    queues: list[str] = []
    for part in text.split(","):
        name = part.strip()
        if not QUEUE_NAME.match(name):
            raise ValidationError(
                f"{name!r} is not a queue name (lower-case letters, digits, '_' and '-', "
                "at most 64, starting with a letter or digit)",
                field,
            )
        if name not in queues:
            queues.append(name)
    if len(queues) > MAX_WORKER_QUEUES:
        raise ValidationError(f"at most {MAX_WORKER_QUEUES} queues per worker", field)
    return tuple(queues)
