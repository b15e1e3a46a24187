"""How the Redis client's calls become redis-py commands and its replies come back: a
plan's :class:`~shardsched.store.calls.Call` as a command (a script by its function), packed
by hiredis, its refusals (BUSY, LOADING, NOPERM...) raised as RedisUnavailable, and the
TLS options redis-py is given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hiredis
import redis as redis_py

from shardsched import ops
from shardsched.core.errors import RedisUnavailable
from shardsched.store.calls import refusal
from shardsched.store.scripts import fcall, load_functions, loaded_anyway


def tls_kwargs(redis_url: str) -> dict[str, Any]:
    """What redis-py is told about TLS: the options the trio client reads, nothing else
    (a ``ssl_cert_reqs=none`` or ``ssl_check_hostname=false`` in the URL is a ValueError,
    as it is for the CLI and the services), and verification with hostname checks on."""
    from urllib.parse import urlsplit

    from shardsched.store.redis.tls import parse_options

    parts = urlsplit(redis_url)
    parse_options(parts.query)  # refuses any other option
    if parts.scheme != "rediss":
        return {}
    return {"ssl_cert_reqs": "required", "ssl_check_hostname": True}


def sentinel_client(redis_url: str) -> Any:
    """A redis-py client on the primary a ``redis[s]+sentinel://`` URL's sentinels name
    (redis-py's Sentinel finds it again after a failover; a READONLY reply from a demoted
    primary is raised as a lost connection, the next call finds the new one)."""
    from redis.sentinel import Sentinel

    from shardsched.store.redis.sentinel import SentinelURL

    spec = SentinelURL.parse(redis_url)
    ssl: dict[str, Any] = {}
    if spec.server.tls is not None:  # the same options the trio client reads
        tls = spec.server.tls
        ssl = {"ssl": True, "ssl_ca_certs": tls.ca_file, "ssl_certfile": tls.cert_file,
               "ssl_keyfile": tls.key_file, "ssl_cert_reqs": "required",
               "ssl_check_hostname": True}  # fmt: skip
    first = spec.sentinels[0]
    sentinel = Sentinel(
        [(s.host, s.port) for s in spec.sentinels],
        sentinel_kwargs={"username": first.username, "password": first.password, **ssl},
        socket_timeout=5.0,
        **ssl,
    )
    server = spec.server
    return sentinel.master_for(
        spec.service, username=server.username, password=server.password, db=server.db,
        protocol=2,
    )  # fmt: skip


def packed(calls: Sequence[ops.Call]) -> bytes:
    """The commands of ``calls`` in the Redis protocol, packed by hiredis itself (redis-py's
    packer looks at each argument in Python first: a tenth of a bulk registration's time)."""
    return b"".join(hiredis.pack_command(command(call)) for call in calls)


def command(call: ops.Call) -> tuple[Any, ...]:
    """The Redis command of ``call`` (a script: FCALL of its function)."""
    if call.script is None:
        return call.args
    return fcall(call.script, call.keys, call.args)


def load_functions_on(client: redis_py.Redis) -> None:
    """FUNCTION LOAD every library on one server. One already there, on a replica or on a
    full server is loaded anyway (redis-py drops the READONLY and OOM words: told by the
    exception's class); a user that may load none (NOPERM) loads none."""
    pipe = client.pipeline(transaction=False)
    for load in load_functions():
        pipe.execute_command(*load)
    kept = (redis_py.exceptions.ReadOnlyError, redis_py.exceptions.OutOfMemoryError)
    for reply in pipe.execute(raise_on_error=False):
        if isinstance(reply, redis_py.exceptions.NoPermissionError):
            return
        if isinstance(reply, Exception) and not (loaded_anyway(reply) or isinstance(reply, kept)):
            raise reply


def refused(calls: Sequence[ops.Call], replies: list[Any]) -> list[Any]:
    """The replies, once ``store.calls.refusal`` found none that refuses its call (BUSY,
    LOADING, OOM, READONLY, NOPERM, ...); raises RedisUnavailable for one that does, as
    the trio driver does: a caller hears "come back later", never a TypeError."""
    refused = refusal(calls, [_coded(r) for r in replies])
    if refused is not None:
        raise RedisUnavailable(refused)
    return replies


def _coded(reply: Any) -> Any:
    """An error reply as Redis sent it: redis-py strips the code (``NOPERM``, ``OOM``...)
    from the text of the exceptions it makes and keeps it as ``status_code``."""
    if not isinstance(reply, redis_py.exceptions.RedisError):
        return reply
    code = getattr(reply, "status_code", None)
    text = str(reply)
    if code and not text.startswith(code):
        text = f"{code} {text}"
    return RedisUnavailable(text)
