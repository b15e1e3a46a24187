"""What every request passes before its handler: Host, Origin, and the bearer token.

A scheduler's API runs shell commands on every worker, so the checks are on by default:

- **Host**: an API bound to loopback answers only to loopback names (``localhost``,
  ``127.0.0.1``, ``[::1]``), so a web page cannot reach it by DNS rebinding.
- **Origin**: a browser's cross-site request is refused (403) unless its origin is allowed;
  clients that send no ``Origin`` (the CLI, the SDK, curl) are not affected.
- **Token**: ``Authorization: Bearer <token>``, or the dashboard's session cookie (with
  ``X-CSRF-Token`` on a change: :mod:`.session`); 401 when missing or unknown (a revoked
  token is unknown on the next request), 403 when its scopes do not cover the route.

``--insecure-no-auth`` turns the token check off, and only on a loopback bind.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.requests import Request

from shardsched.core.access import ANONYMOUS, Principal, Scope, bearer
from shardsched.core.errors import ConfigError
from shardsched.ops.access import tokens
from shardsched.router.http import ApiError
from shardsched.router.session import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_ok
from shardsched.store.deployment import Deployment
from shardsched.store.drive import drive_async
from shardsched.store.redis import Redis

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """Whether a bind host or a Host header's name is a loopback name or address."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    """The name of a ``Host`` header value (without its port)."""
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rpartition(":")[0] if value.count(":") == 1 else value


@dataclass(frozen=True)
class AccessPolicy:
    """How an API checks its callers; the default is the safe one."""

    auth: bool = True  #: False only with --insecure-no-auth (loopback only)
    loopback_hosts: bool = True  #: refuse a Host that is not a loopback name
    allowed_hosts: tuple[str, ...] = ()  #: Host names allowed besides those
    allowed_origins: tuple[str, ...] = ()  #: browser origins allowed (besides the API's own)
    metrics_auth: bool = False  #: /metrics wants a token with the read scope

    @classmethod
    def for_bind(
        cls,
        bind_host: str,
        *,
        insecure_no_auth: bool = False,
        allowed_hosts: tuple[str, ...] = (),
        allowed_origins: tuple[str, ...] = (),
        metrics_auth: bool = False,
    ) -> AccessPolicy:
        """The policy of an API bound to ``bind_host``; refuses no-auth off loopback."""
        loopback = is_loopback(bind_host)
        if insecure_no_auth and not loopback:
            raise ConfigError(
                f"--insecure-no-auth is refused on a non-loopback bind ({bind_host}): anyone "
                "who reaches the port could run commands on every worker"
            )
        return cls(
            auth=not insecure_no_auth,
            loopback_hosts=loopback,
            allowed_hosts=tuple(h.lower() for h in allowed_hosts),
            allowed_origins=tuple(o.rstrip("/").lower() for o in allowed_origins),
            metrics_auth=metrics_auth,
        )


class Gate:
    """Applies an :class:`AccessPolicy` to requests: one per app."""

    def __init__(self, policy: AccessPolicy, redis: Redis, dep: Deployment) -> None:
        self.policy, self.redis, self.dep = policy, redis, dep

    def check_host_and_origin(self, request: Request) -> None:
        host = request.headers.get("host", "")
        name = _host_name(host).lower()
        p = self.policy
        if p.loopback_hosts and not is_loopback(name) and name not in p.allowed_hosts:
            raise ApiError(
                403, "host_not_allowed", f"Host {host!r} is not a loopback name", {"host": host}
            )
        origin = request.headers.get("origin")
        if origin is None:
            return
        origin = origin.rstrip("/").lower()
        own = {f"{request.url.scheme}://{host.lower()}"}
        if origin not in own and origin not in p.allowed_origins:
            raise ApiError(
                403, "origin_not_allowed", f"Origin {origin!r} is not allowed", {"origin": origin}
            )

    async def principal(self, request: Request, needed: Scope | None) -> Principal:
        """Who the request acts as; raises the 401 or 403 when it may not."""
        self.check_host_and_origin(request)
        if needed is None or not self.policy.auth:
            return ANONYMOUS
        token = bearer(request.headers.get("authorization"))
        by_cookie = token is None and SESSION_COOKIE in request.cookies
        if by_cookie:
            token = request.cookies[SESSION_COOKIE][:200] or None
        if token is None:
            raise ApiError(
                401, "unauthorized", "missing credentials: send Authorization: Bearer <token>"
            )
        who = await drive_async(tokens.authenticate(self.dep, token), self.redis)
        if who is None:
            raise ApiError(401, "unauthorized", "unknown or revoked token")
        unsafe = request.method not in SAFE_METHODS
        if by_cookie and unsafe and not csrf_ok(token, request.headers.get(CSRF_HEADER)):
            raise ApiError(
                403, "csrf", "a change made with the session cookie needs its X-CSRF-Token"
            )
        if not who.may(needed):
            scopes = ", ".join(sorted(who.scopes))
            raise ApiError(
                403,
                "forbidden",
                f"token {who.name!r} ({scopes}) lacks the {needed} scope",
                {"needed": str(needed)},
            )
        return who


def who(request: Request) -> Principal:
    """The principal the gate let in (set before every handler runs)."""
    principal: Principal = request.state.principal
    return principal


def unbound(request: Request) -> None:
    """Cluster-wide views and token management are not for a team's token."""
    principal = who(request)
    if principal.bound:
        raise ApiError(
            403, "forbidden", f"token {principal.name!r} is bound to a team: not cluster-wide"
        )


def as_worker(request: Request, worker_id: str) -> None:
    """A ``worker`` token acts only as its own workers: ids that start with one of its
    prefixes, or with its name when it has none (an ``admin`` token as any). So one
    worker's token cannot claim, renew or complete as another worker (403)."""
    principal = who(request)
    if Scope.ADMIN in principal.scopes:
        return
    allowed = principal.prefixes or (principal.name,)
    if not worker_id.startswith(allowed):
        names = ", ".join(repr(p) for p in allowed)
        raise ApiError(
            403,
            "forbidden",
            f"token {principal.name!r} acts only as workers whose id starts with {names}",
            {"field": "worker_id"},
        )
