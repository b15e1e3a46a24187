"""Every item of a paginated list, page after page: ``client.each(client.list_jobs,
name_prefix="billing-")`` is an iterator over the jobs, whichever client (Redis or HTTP,
blocking or async) answers the pages. A page is a Struct with one list and a
``next_cursor``; the next page is asked for with ``cursor=``."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import msgspec


def items(page: Any) -> list[Any]:
    """The page's one list (``jobs``, ``runs``, ``dags``, ``changes``...)."""
    if not isinstance(page, msgspec.Struct):
        raise TypeError(f"not a page of a list: {type(page).__name__}")
    lists = [getattr(page, f) for f in page.__struct_fields__ if isinstance(getattr(page, f), list)]
    if len(lists) != 1 or not hasattr(page, "next_cursor"):
        raise TypeError(f"not a page of a list: {type(page).__name__}")
    found: list[Any] = lists[0]
    return found


def _pages_by_cursor(listing: Callable[..., Any]) -> None:
    if "cursor" not in inspect.signature(listing).parameters:
        raise TypeError(
            f"{getattr(listing, '__name__', listing)} is not paged by cursor"
            " (list_events is followed with after=next_cursor)"
        )


def each(listing: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """Every item ``listing`` lists, asking for the next page while there is one."""
    _pages_by_cursor(listing)
    cursor = kwargs.pop("cursor", None)
    while True:
        page = listing(*args, cursor=cursor, **kwargs)
        yield from items(page)
        cursor = page.next_cursor
        if not cursor:
            return


async def aeach(
    listing: Callable[..., Awaitable[Any]], /, *args: Any, **kwargs: Any
) -> AsyncIterator[Any]:
    """As :func:`each`, for an async client's ``listing``."""
    _pages_by_cursor(listing)
    cursor = kwargs.pop("cursor", None)
    while True:
        page = await listing(*args, cursor=cursor, **kwargs)
        for item in items(page):
            yield item
        cursor = page.next_cursor
        if not cursor:
            return
