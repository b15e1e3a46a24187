"""A Redis server's URL, as the trio client reads it: ``redis[s]://[user[:password]@]host
[:port][/db][?tls options]`` (the cluster and sentinel URLs name several of them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from shardsched.store.redis.tls import TlsOptions, parse_options

_USERINFO_PASSWORD = re.compile(r"(//[^:/@]*:)[^@]*@")
_QUERY_PASSWORD = re.compile(r"((?:^|[?&])sentinel_password=)[^&]*")


def redacted(url: str) -> str:
    """The URL with its passwords (the user info's, a ``sentinel_password``) as ``***``:
    what an error message or a log may show."""
    return _QUERY_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1***@", url))


@dataclass(frozen=True, slots=True)
class RedisURL:
    host: str = "127.0.0.1"
    port: int = 6379
    username: str | None = None
    password: str | None = None
    db: int = 0
    tls: TlsOptions | None = None  #: None: plain TCP

    @classmethod
    def parse(cls, url: str) -> RedisURL:
        """Parse ``redis[s]://[user[:password]@]host[:port][/db][?tls options]``; raises
        ValueError."""
        parts = urlsplit(url)
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError(
                f"unsupported Redis URL scheme {parts.scheme!r} in {redacted(url)!r} (redis://,"
                " rediss://, redis+cluster://, redis+sentinel://, all in lower case)"
            )
        if parts.query and parts.scheme != "rediss":
            raise ValueError(
                f"URL options are TLS options: they want rediss://, in {redacted(url)!r}"
            )
        db_text = parts.path.lstrip("/")
        if db_text and not db_text.isdigit():
            raise ValueError(f"the db of a Redis URL is a number, not {db_text!r}")
        return cls(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
            db=int(db_text) if db_text else 0,
            tls=parse_options(parts.query) if parts.scheme == "rediss" else None,
        )
