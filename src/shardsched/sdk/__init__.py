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

from shardsched.sdk.aio import AsyncClient
from shardsched.sdk.sync import Client

__all__ = ["AsyncClient", "Client"]
