"""The deployment's keys of notifications, in the ``{g}`` hash slot: the rules and channels
an operator manages, the outbox of matches the owners note, and the dispatcher's
messages with their delivery records (shard/follower.py, shard/dispatcher.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NotifyKeys:
    base: str  #: the deployment-wide prefix, ``<ns>:{g}:``

    @property
    def rules(self) -> str:
        """HASH rule id -> core.notify.Rule JSON: which transitions notify which channels."""
        return self.base + "ntfrules"

    @property
    def channels(self) -> str:
        """HASH channel name -> core.notify.Channel JSON (a webhook's secret included)."""
        return self.base + "ntfchannels"

    @property
    def outbox(self) -> str:
        """STREAM notification matches the owners noted, for the dispatcher to group."""
        return self.base + "ntfout"

    @property
    def seen(self) -> str:
        """ZSET match key -> when added (ms): a match is put on the outbox once a day."""
        return self.base + "ntfseen"

    @property
    def lease(self) -> str:
        """STRING node id holding the notification dispatcher's lease (PX expiry)."""
        return self.base + "ntflease"

    @property
    def messages(self) -> str:
        """ZSET message id -> when made (ms): every message and its delivery record."""
        return self.base + "ntfmsgs"

    @property
    def due(self) -> str:
        """ZSET message id -> when its next delivery attempt is due (ms)."""
        return self.base + "ntfdue"

    def message(self, msg_id: str) -> str:
        """HASH a message: channel, rule, body JSON, state, attempts, last answer."""
        return self.base + "ntfmsg:" + msg_id

    def attempts(self, msg_id: str) -> str:
        """LIST a message's delivery attempts, "ms|outcome|took ms|answer", the last 50."""
        return self.base + "ntfatt:" + msg_id
