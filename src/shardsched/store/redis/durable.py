"""The durable mode on the trio client (store/deployment.py's ``Durability``, docs/
operations.md "High availability"): which round trips wait for replicas, and with what.

A round trip that may write ends with ``PUBLISH <ns>:durable ""`` and ``WAIT n ms``. WAIT
counts the replicas that have the connection's last write; the PUBLISH (propagated to the
replicas, heard by nobody) makes that write the newest of the whole primary, so a round
trip acknowledged in the durable mode means every write the primary made before it, on
any connection, is on the replicas: a claim retried on another connection, a completion
sent again, an earlier firing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Command = Sequence[str | bytes | int | float]

#: Commands that write nothing: a round trip of these alone does not wait for replicas
#: in the durable mode (what it reads may yet be lost in a failover; a read does not
#: acknowledge anything). Every script counts as a write.
READ_ONLY = frozenset(
    b"GET MGET STRLEN EXISTS TTL PTTL TYPE HGET HMGET HGETALL HLEN HEXISTS HKEYS HSCAN"
    b" ZRANGE ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ZSCORE ZMSCORE ZCARD ZCOUNT ZRANK"
    b" LRANGE LLEN LINDEX SMEMBERS SCARD SISMEMBER SMISMEMBER SSCAN SCAN GETRANGE"
    b" XRANGE XREVRANGE XLEN XPENDING XINFO TIME PING INFO ROLE".split()
)


def writes(commands: Sequence[Command]) -> bool:
    """Whether a round trip may write (anything but :data:`READ_ONLY` commands and
    ``CONFIG GET``)."""
    for command in commands:
        name = command[0]
        raw = (name if isinstance(name, bytes) else str(name).encode()).upper()
        if raw in READ_ONLY:
            continue
        if raw == b"CONFIG" and str(command[1]).upper() in ("GET", "B'GET'"):
            continue
        return True
    return False


@dataclass(frozen=True, slots=True)
class Durable:
    """The durable mode on a client: the commands that end each round trip."""

    replicas: int
    timeout_ms: int
    channel: str  #: PUBLISHed to (nobody listens): every write before it is then counted

    @property
    def commands(self) -> tuple[Command, Command]:
        return (("PUBLISH", self.channel, ""), ("WAIT", self.replicas, self.timeout_ms))
