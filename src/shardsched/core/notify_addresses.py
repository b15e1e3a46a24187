"""Where a notification may be sent: not to the machine's own services, its cloud's
metadata endpoint or anything else an HTTP request from inside the network should never
reach (server-side request forgery).

A channel is an admin's, but an admin token is not a shell on the node: a webhook to
``http://169.254.169.254/…`` or ``http://[::1]:6379/`` would make the node fetch what
its network position allows. Refused unless the operator allows the network on the
process (``--notify-allow-network CIDR``, ``SHARDSCHED_NOTIFY_ALLOW_NETWORKS``): loopback,
link-local (the metadata endpoints), unspecified, multicast and reserved addresses, IPv4
written any way ``inet_aton`` reads it (``0x7f000001``, ``2130706433``, ``127.1``) and
IPv4-mapped IPv6. The API refuses such a literal address when the channel is set; the
node checks every address a name resolves to when it connects (a name may resolve to
loopback), and follows no redirect.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Special-purpose networks that are no public receiver's: shared address space (CGNAT,
#: Alibaba Cloud's metadata endpoint is in it), IETF protocol assignments, benchmarking,
#: the documentation networks, and AWS's IPv6 metadata endpoint.
_SPECIAL = tuple(
    ipaddress.ip_network(n)
    for n in ("100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "192.0.2.0/24",
              "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32", "fd00:ec2::254/128")
)  # fmt: skip
#: What ``inet_aton`` takes for an IPv4 address: digits, hex and dots only.
_NUMERIC = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$(?!\n)", re.IGNORECASE)
ENV = "SHARDSCHED_NOTIFY_ALLOW_NETWORKS"


def parse_networks(items: Iterable[str]) -> tuple[Network, ...]:
    """CIDRs (``127.0.0.0/8``, ``::1``) as networks; ValueError naming a bad one."""
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"not a network: {item!r} (give a CIDR, e.g. 10.0.0.0/8)") from None
    return tuple(out)


def networks_from(environ: Mapping[str, str]) -> tuple[Network, ...]:
    """The networks a process may notify despite the policy: ``SHARDSCHED_NOTIFY_ALLOW_
    NETWORKS`` in ``environ`` (comma-separated CIDRs, set by ``--notify-allow-network``)."""
    return parse_networks(environ.get(ENV, "").split(","))


def literal_address(host: str) -> IPAddress | None:
    """The address a URL's host names by itself (no name to resolve), however written."""
    host = host.strip("[]")
    host = host[:-1] if host.endswith(".") and not host.endswith("..") else host
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if _NUMERIC.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def refusal(address: IPAddress, allowed: Sequence[Network] = ()) -> str | None:
    """Why a notification may not go to ``address`` (None: it may)."""
    if isinstance(address, ipaddress.IPv6Address):
        # an IPv4 address inside (mapped, 6to4, Teredo's client, NAT64) is judged too
        inner = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if inner is None and address in ipaddress.ip_network("64:ff9b::/96"):
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None and (why := refusal(inner, allowed)) is not None:
            return why
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
    if any(address.version == net.version and address in net for net in allowed):
        return None
    for kind, hit in (
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("unspecified", address.is_unspecified),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("special-purpose", any(address in n for n in _SPECIAL if n.version == address.version)),
    ):
        if hit:
            return (
                f"{kind} addresses are not notified (a node's --notify-allow-network "
                "allows a network)"
            )
    return None


def url_refusal(url: str, allowed: Sequence[Network] = ()) -> str | None:
    """Why a channel's URL may not be used, when its host is an address written out."""
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return "not a URL"
    if not host:
        return None
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761: always loopback
        return refusal(ipaddress.ip_address("127.0.0.1"), allowed)
    address = literal_address(host)
    return None if address is None else refusal(address, allowed)
