"""A primary, its replicas and three sentinels on loopback: what ``dev --sentinel`` and
the HA tests run, every one a child held on this process's lifeline (see redis_server).

Every server has the same password (``requirepass`` and ``masterauth``, in a 0600 file: a
demoted primary must authenticate to the new one), AOF with fsync always, and the
embedded server's other settings. The sentinels judge a primary down after
``down_after_ms`` and need two of three to agree.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from shardsched.runtime.redis_server import (
    free_ports,
    redis_server_args,
    spawn,
    stop_process,
    wait_for_redis,
)
from shardsched.store.redis import Redis, RedisConnectionError, RedisError, ReplyError
from shardsched.store.redis.connection import Connection, RedisURL
from shardsched.store.redis.errors import RedisConnectError
from shardsched.store.redis.tls import TlsOptions

SERVICE = "shardsched"


@dataclass
class SentinelGroup:
    """Where everything listens, and the processes by port (to kill, stop and restart)."""

    root: Path
    password: str
    primary_port: int  #: the primary at the start
    replica_ports: list[int]
    sentinel_ports: list[int]
    procs: dict[int, trio.Process] = field(default_factory=dict)
    down_after_ms: int = 1000
    extra_args: tuple[str, ...] = ()  #: more server settings (the tests' notifications)
    #: TLS everywhere (no plain port): the servers' and sentinels' certificate, key and CA
    #: (the certificate must name 127.0.0.1: the sentinels report servers by address)
    tls: tuple[Path, Path, Path] | None = None
    user: str = ""  #: an ACL user the clients use instead of the default one
    sentinel_auth: bool = False  #: the sentinels want the password too (``dev``'s do)

    @property
    def _auth(self) -> str:
        return f"{self.user}:{self.password}"

    @property
    def _options(self) -> str:
        options = []
        if self.tls is not None:
            cert, key, ca = self.tls
            options.append(f"ssl_ca_certs={ca}&ssl_certfile={cert}&ssl_keyfile={key}")
        return "?" + "&".join(options) if options else ""

    @property
    def _sentinel_options(self) -> str:
        extra = f"sentinel_password={self.password}" if self.sentinel_auth else ""
        if not extra:
            return self._options
        return f"{self._options}&{extra}" if self._options else f"?{extra}"

    @property
    def url(self) -> str:
        sentinels = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        scheme = "rediss+sentinel" if self.tls else "redis+sentinel"
        return f"{scheme}://{self._auth}@{sentinels}/{SERVICE}{self._sentinel_options}"

    def server_url(self, port: int) -> str:
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{self._auth}@127.0.0.1:{port}/0{self._options}"

    def sentinel_url(self, port: int) -> RedisURL:
        return RedisURL(
            port=port,
            password=self.password if self.sentinel_auth else None,
            tls=None
            if self.tls is None
            else TlsOptions(str(self.tls[2]), str(self.tls[0]), str(self.tls[1])),
        )

    def _tls_settings(self, port: int) -> list[str]:
        if self.tls is None:
            return []
        cert, key, ca = self.tls
        return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(cert),
                "--tls-key-file", str(key), "--tls-ca-cert-file", str(ca),
                "--tls-replication", "yes", "--tls-auth-clients", "optional"]  # fmt: skip

    def server_args(self, port: int, replica_of: int | None) -> list[str]:
        data_dir = self.root / str(port)
        data_dir.mkdir(parents=True, exist_ok=True)
        args = redis_server_args(port, data_dir, "always", config_file=self.root / "auth.conf")
        args += self._tls_settings(port)
        if replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(replica_of)]
        return [*args, *self.extra_args]

    async def start_server(self, port: int, replica_of: int | None) -> None:
        self.procs[port] = await spawn(
            self.server_args(port, replica_of), stdout=subprocess.DEVNULL
        )

    async def start_sentinel(self, port: int) -> None:
        conf = self.root / f"sentinel-{port}.conf"
        if not conf.exists():  # a sentinel rewrites its file: a restart keeps what it learnt
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.root}\n"
                f"logfile {self.root / f'sentinel-{port}.log'}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2\n"
                + (f"sentinel auth-user {SERVICE} {self.user}\n" if self.user else "")
                + f"sentinel auth-pass {SERVICE} {self.password}\n"
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {SERVICE} {max(4 * self.down_after_ms, 3000)}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
                + (f"requirepass {self.password}\n" if self.sentinel_auth else "")
            )
            conf.chmod(0o600)
        binary = redis_server_args(port, self.root)[0]
        args = [binary, str(conf), "--sentinel", *self._tls_settings(port)]
        self.procs[port] = await spawn(args, stdout=subprocess.DEVNULL)

    async def primary(self) -> int:
        """The port the sentinels name primary now (asking the first that answers)."""
        for port in self.sentinel_ports:
            try:
                reply = await ask_sentinel(
                    self.sentinel_url(port), "get-master-addr-by-name", SERVICE
                )
            except RedisError:  # a stopped or dead sentinel: ask the next
                continue
            return int(reply[1])
        raise RedisConnectError("no sentinel answers")


async def ask_sentinel(sentinel: int | RedisURL, *command: str) -> Any:
    """``SENTINEL <command…>`` to the sentinel at a port of 127.0.0.1, or a URL (half a
    second to connect)."""
    url = RedisURL(port=sentinel) if isinstance(sentinel, int) else sentinel
    conn = await Connection.open(url, 0.5, scripts=False)
    try:
        with trio.fail_after(2):
            (reply,) = await conn.execute_many([("SENTINEL", *command)])
    finally:
        await conn.aclose()
    if isinstance(reply, BaseException):
        raise ReplyError(str(reply))
    return reply


async def start_sentinel_group(
    root: Path,
    replicas: int = 1,
    sentinels: int = 3,
    down_after_ms: int = 1000,
    extra_args: tuple[str, ...] = (),
    tls: tuple[Path, Path, Path] | None = None,
    user: str = "",
    sentinel_auth: bool = False,
) -> SentinelGroup:
    """Start the servers and sentinels; returns once every replica is in sync and every
    sentinel knows them all."""
    root.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    auth = root / "auth.conf"
    auth.write_text(
        f"requirepass {password}\nmasterauth {password}\n"
        + (f"masteruser {user}\nuser {user} on >{password} ~* &* +@all\n" if user else "")
    )
    auth.chmod(0o600)
    ports = free_ports(1 + replicas + sentinels)
    group = SentinelGroup(
        root,
        password,
        ports[0],
        ports[1 : 1 + replicas],
        ports[1 + replicas :],
        down_after_ms=down_after_ms,
        extra_args=extra_args,
        tls=tls,
        user=user,
        sentinel_auth=sentinel_auth,
    )
    try:
        await _start(group, replicas, sentinels)
    except BaseException:  # nothing left running behind a group that did not start
        for proc in group.procs.values():
            await stop_process(proc, grace=1)  # shielded itself
        raise
    return group


async def _start(group: SentinelGroup, replicas: int, sentinels: int) -> None:
    await group.start_server(group.primary_port, None)
    await wait_for_redis(group.server_url(group.primary_port))
    for port in group.replica_ports:
        await group.start_server(port, group.primary_port)
    for port in group.replica_ports:
        replica = Redis(group.server_url(port), size=1, retry_for=10, log_failures=False)
        try:
            with trio.fail_after(30):
                while b"master_link_status:up" not in await replica.execute("INFO", "replication"):
                    await trio.sleep(0.05)  # the replica's first sync: polled, no event to wait on
        finally:
            await replica.aclose()
    for port in group.sentinel_ports:
        await group.start_sentinel(port)
    with trio.fail_after(30):
        for port in group.sentinel_ports:
            while True:
                try:
                    info = await ask_sentinel(group.sentinel_url(port), "master", SERVICE)
                except RedisConnectionError:
                    info = [b"num-slaves", b"0", b"num-other-sentinels", b"0"]  # starting
                fields = dict(zip(info[::2], info[1::2], strict=True))
                if (
                    int(fields[b"num-slaves"]) >= replicas
                    and int(fields[b"num-other-sentinels"]) >= sentinels - 1
                ):
                    break
                await trio.sleep(0.1)  # sentinels find each other by hello messages: polled
