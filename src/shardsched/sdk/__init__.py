"""The Python SDK: ``shardsched.Client`` (synchronous, redis-py + hiredis) and
``shardsched.AsyncClient`` (trio, on the service's own connection).

No HTTP hop: both drive the same operations (:mod:`shardsched.ops` and friends) and so the
very same Lua scripts as the router. Every operation is written once, in :mod:`.plans`;
the two clients differ only in how they run it. Bulk registration pipelines every script
call of a batch in one round trip.

Errors: JobNotFound / RunNotFound / DagNotFound / DagRunNotFound (LookupError), JobDeleted
/ DagDeleted / DagTaskJob / ConflictError, and ValidationError (with ``field``, the
$.path) for invalid input — as the HTTP API answers 404 / 409 / 422.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shardsched.sdk.aio import AsyncClient
    from shardsched.sdk.sync import Client


def __getattr__(name: str) -> object:
    # Loaded when asked for: the CLI reads sdk.http.settings without redis-py or trio.
    if name == "Client":
        from shardsched.sdk.sync import Client

        return Client
    if name == "AsyncClient":
        from shardsched.sdk.aio import AsyncClient

        return AsyncClient
    raise AttributeError(name)


__all__ = ["AsyncClient", "Client"]
