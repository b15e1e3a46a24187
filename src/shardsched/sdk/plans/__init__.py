"""Every SDK operation, once: a function from a client handle and its arguments to a
:class:`Plan` (the operation and the type of its result), in the module of its resource
(:mod:`.jobs`, :mod:`.runs`, :mod:`.dags`, :mod:`.ticks`, :mod:`.schedules`,
:mod:`.notify`, :mod:`.concurrency`); what they share is here. The clients
(:mod:`shardsched.sdk.sync`, :mod:`shardsched.sdk.aio`) bind each plan as a method that
runs it, blocking or awaitable, so both clients have the same methods with honest types."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar

import msgspec

from shardsched import ops
from shardsched.core.errors import BulkPartiallyApplied, ValidationError
from shardsched.core.field_errors import field_error
from shardsched.core.models import JobSpec
from shardsched.core.views import JobCreated
from shardsched.store.deployment import Deployment

T = TypeVar("T")


class Handle(Protocol):
    """What a plan needs of a client: the deployment it talks to, and who it records as
    the author of its changes."""

    deployment: Deployment
    actor: str


class Plan(Generic[T]):
    """An operation whose result is a ``T``."""

    __slots__ = ("op",)

    def __init__(self, op: ops.Op) -> None:
        self.op = op


def as_validation_error(exc: msgspec.ValidationError) -> ValidationError:
    """msgspec's error as ours, its field named as the HTTP API names it
    (core/field_errors.py)."""
    return field_error(exc)


#: The largest page a list answers (the API's too: router/schemas.MAX_PAGE).
MAX_PAGE = 1000


def page_size(limit: int, most: int = MAX_PAGE) -> None:
    """ValidationError (``$.limit``) unless ``limit`` is a page size the API takes too."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise ValidationError(f"limit is 1 to {most}, not {limit!r}", "$.limit")


def validated_batches(specs: Iterable[JobSpec], batch: int) -> list[list[JobSpec]]:
    """Every spec validated before anything is written (a bad one raises ValidationError
    naming ``$[i].field``), then cut into batches of ``batch``."""
    chunk = list(specs)
    try:
        ops.validate_specs(chunk)
    except msgspec.ValidationError as exc:
        raise as_validation_error(exc) from None
    return [chunk[i : i + batch] for i in range(0, len(chunk), batch)]


@contextmanager
def bulk_progress(created: list[JobCreated]) -> Iterator[None]:
    """A failure after some batches were committed raises BulkPartiallyApplied listing
    ``created``; a failure of the first batch is raised as it is."""
    try:
        yield
    except Exception as exc:
        if not created:
            raise
        raise BulkPartiallyApplied(created, exc) from exc
