"""The SDK over the HTTP API, with a token: :class:`HttpClient` (blocking) and
:class:`AsyncHttpClient` (trio or asyncio), what ``shardsched.Client("https://…")`` and
``shardsched.AsyncClient.open("https://…")`` make. The same operations, arguments, result
types and exceptions as the Redis SDK (one table, :mod:`shardsched.sdk.operations`; a
route per operation, :mod:`.routes`); the service records the token's name as the author
of each change."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shardsched.sdk.http.aio import AsyncHttpClient
    from shardsched.sdk.http.sync import HttpClient


def __getattr__(name: str) -> object:
    # Loaded when asked for: the CLI reads .settings without httpx.
    if name == "HttpClient":
        from shardsched.sdk.http.sync import HttpClient

        return HttpClient
    if name == "AsyncHttpClient":
        from shardsched.sdk.http.aio import AsyncHttpClient

        return AsyncHttpClient
    raise AttributeError(name)


__all__ = ["AsyncHttpClient", "HttpClient"]
