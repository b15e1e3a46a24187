"""The nemesis's Redis: a primary, two replicas and three sentinels, each server in a
network namespace of its own (bench/ha_net.py), started, killed, stopped and started
again by PID, and asked which of them is primary."""

from __future__ import annotations

import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis as redis_py

from shardsched.bench.ha_net import HaNet
from shardsched.runtime.lifeline import child_env, lifeline
from shardsched.runtime.redis_server import redis_server_args

SERVICE = "shardsched"
PORT = 6379  #: every server's, each in its own namespace
SENTINEL_PORTS = (26379, 26380, 26381)


@dataclass
class HaRedis:
    root: Path
    net: HaNet
    down_after_ms: int = 1000
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        sentinels = ",".join(f"{self.net.sentinel_ip}:{p}" for p in SENTINEL_PORTS)
        return f"redis+sentinel://:{self.password}@{sentinels}/{SERVICE}"

    def _spawn(self, name: str, ns: str, args: list[str]) -> None:
        proc = subprocess.Popen(
            [*self.net.exec_in(ns), *args], stdout=subprocess.DEVNULL, env=child_env()
        )
        lifeline().hold(proc.pid, group=False)
        self.procs[name] = proc

    def start_server(self, i: int, replica_of: int | None) -> None:
        data = self.root / f"r{i}"
        data.mkdir(parents=True, exist_ok=True)
        args = redis_server_args(PORT, data, "always", config_file=self.root / "auth.conf")
        args += ["--bind", self.net.server_ip(i)]
        if replica_of is not None:
            args += ["--replicaof", self.net.server_ip(replica_of), str(PORT)]
        self._spawn(f"r{i}", self.net.server_ns(i), args)

    def start(self) -> None:
        """Every server and sentinel; returns once the sentinels know each other and both
        replicas."""
        self.root.mkdir(parents=True, exist_ok=True)
        auth = self.root / "auth.conf"
        auth.write_text(f"requirepass {self.password}\nmasterauth {self.password}\n")
        auth.chmod(0o600)
        self.start_server(0, None)
        self.server(0).ping()  # retried until it answers (server())
        for i in range(1, self.net.servers):
            self.start_server(i, 0)
        for port in SENTINEL_PORTS:
            conf = self.root / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind {self.net.sentinel_ip}\nprotected-mode no\ndir {self.root}\n"
                f"logfile {self.root / f'sentinel-{port}.log'}\n"
                f"sentinel monitor {SERVICE} {self.net.server_ip(0)} {PORT} 2\n"
                f"sentinel auth-pass {SERVICE} {self.password}\n"
                f"sentinel down-after-milliseconds {SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {SERVICE} {max(4 * self.down_after_ms, 3000)}\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            binary = redis_server_args(port, self.root)[0]
            self._spawn(f"s{port}", self.net.sentinel_ns, [binary, str(conf), "--sentinel"])
        deadline = time.monotonic() + 60
        while not self._settled():
            if time.monotonic() > deadline:
                raise TimeoutError("the sentinels did not find each other and the replicas")
            time.sleep(0.2)  # sentinels meet through hello messages every 2 s: polled

    def _settled(self) -> bool:
        primary = self.server(0)
        for i in range(1, self.net.servers):  # each replica's first sync done
            if self.server(i).info("replication").get("master_link_status") != "up":
                return False
        primary.publish("nemesis", "")
        if primary.wait(self.net.servers - 1, 200) < self.net.servers - 1:
            return False
        for port in SENTINEL_PORTS:
            try:
                info = self.sentinel(port).sentinel_master(SERVICE)
            except redis_py.RedisError:
                return False
            if info["num-slaves"] < self.net.servers - 1 or info["num-other-sentinels"] < 2:
                return False
        return True

    def sentinel(self, port: int) -> Any:
        return redis_py.Redis(host=self.net.sentinel_ip, port=port, socket_timeout=2)

    def server(self, i: int, timeout: float = 30) -> Any:
        client = redis_py.Redis(
            host=self.net.server_ip(i), port=PORT, password=self.password, socket_timeout=2
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return client
            except redis_py.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)  # a server starting: polled until it answers

    def primary(self) -> int:
        """The server a majority of the sentinels that answer name primary."""
        named: dict[str, int] = {}
        for port in SENTINEL_PORTS:
            try:
                host, _port = self.sentinel(port).sentinel_get_master_addr_by_name(SERVICE)
            except (redis_py.RedisError, TypeError):
                continue
            address = host.decode() if isinstance(host, bytes) else host
            named[address] = named.get(address, 0) + 1
        if not named:
            raise RuntimeError("no sentinel answers")
        host = max(named, key=lambda h: named[h])
        return [self.net.server_ip(i) for i in range(self.net.servers)].index(host)

    def signal(self, i: int, sig: int) -> None:
        self.procs[f"r{i}"].send_signal(sig)

    def kill(self, i: int) -> None:
        proc = self.procs[f"r{i}"]
        proc.kill()
        proc.wait()
        lifeline().release(proc.pid, group=False)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
            lifeline().release(proc.pid, group=False)
