"""The nemesis's network (``bench faults --nemesis``): each Redis server in a network
namespace of its own, the three sentinels in one more, all joined by a bridge in this
namespace, where the nodes and workers run.

Apart, a server can be cut off from some peers and not others: :meth:`HaNet.cut` makes
the primary's namespace drop what it sends to its replicas and sentinels (blackhole
routes), while the nodes and workers, on the bridge's own address, still reach it. That
is the split brain of asynchronous replication: the sentinels promote a replica, and the
old primary goes on taking writes from the clients that still talk to it, until the cut
heals and it is made a replica of the new one, dropping what it took.

Needs root (``ip netns``, a bridge); everything it makes it removes (:meth:`HaNet.down`).
Traffic stays on the bridge: a private /24 (one per run, 10.231.x) that nothing routes
anywhere.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field

SUBNET = "10.231"  #: each network its own /24 in it (by its tag): two runs never meet


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def available() -> bool:
    """Whether this process may make namespaces (root, with ``ip``)."""
    return (
        os.geteuid() == 0
        and subprocess.run(["ip", "netns", "list"], capture_output=True, check=False).returncode
        == 0
    )


@dataclass
class HaNet:
    servers: int = 3
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    made: list[str] = field(default_factory=list)  #: namespaces made, to remove
    cuts: dict[int, list[str]] = field(default_factory=dict)  #: server -> blackholed IPs

    @property
    def subnet(self) -> str:
        return f"{SUBNET}.{int(self.tag, 16) % 240 + 10}"

    @property
    def host_ip(self) -> str:
        """The bridge's address: where the nodes and workers come from."""
        return f"{self.subnet}.1"

    @property
    def sentinel_ip(self) -> str:
        return f"{self.subnet}.21"

    @property
    def bridge(self) -> str:
        return f"ssbr{self.tag}"

    def server_ns(self, i: int) -> str:
        return f"ss{self.tag}r{i}"

    @property
    def sentinel_ns(self) -> str:
        return f"ss{self.tag}st"

    def server_ip(self, i: int) -> str:
        return f"{self.subnet}.{11 + i}"

    def up(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        spots = [(self.server_ns(i), self.server_ip(i)) for i in range(self.servers)]
        for n, (ns, address) in enumerate([*spots, (self.sentinel_ns, self.sentinel_ip)]):
            _ip("netns", "add", ns)
            self.made.append(ns)
            outside, inside = f"ssv{self.tag}{n}", f"ssi{self.tag}{n}"
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", ns)
            _ip("link", "set", outside, "master", self.bridge)
            _ip("link", "set", outside, "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", inside)
            _ip("-n", ns, "link", "set", inside, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def exec_in(self, ns: str) -> list[str]:
        """The prefix that runs a command in namespace ``ns``."""
        return ["ip", "netns", "exec", ns]

    def cut(self, server: int) -> None:
        """Server ``server`` no longer reaches the other servers or the sentinels; the
        nodes and workers still reach it."""
        peers = [self.server_ip(i) for i in range(self.servers) if i != server]
        for address in [*peers, self.sentinel_ip]:
            _ip("-n", self.server_ns(server), "route", "add", "blackhole", f"{address}/32")
        self.cuts[server] = [*peers, self.sentinel_ip]

    def heal(self, server: int) -> None:
        for address in self.cuts.pop(server, []):
            _ip("-n", self.server_ns(server), "route", "del", "blackhole", f"{address}/32")

    def down(self) -> None:
        for n, ns in enumerate(self.made):
            subprocess.run(["ip", "link", "del", f"ssv{self.tag}{n}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        self.made.clear()
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, check=False)
