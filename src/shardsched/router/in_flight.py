"""How many requests the app holds at once, by kind of route, and for whom.

Load sheds before it queues: past a budget a request is answered 503 in the API's error
shape without being read. API calls (``/api/``, ``/internal/``) and the routes anyone may
call (the API's description, the console's files, ``/metrics``, an unknown path) have a
budget each, and one client address holds at most a share of the open one, so stalled
downloads of ``/docs`` cannot take the slots authenticated calls need
(docs/deployment.md, "HTTP limits"). Health and readiness are exempt: a load balancer
must not take a loaded node for a dead one.
"""

from __future__ import annotations

from typing import Any, Protocol

import trio

#: Requests to the API proper in the app at once.
MAX_IN_FLIGHT = 256
#: The routes anyone may call (``is_api_path``) have their own budget of requests in
#: flight, and one client address may hold at most OPEN_PER_CLIENT of it.
OPEN_IN_FLIGHT = 64
OPEN_PER_CLIENT = 16
#: Probes answer however busy the API is.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})
#: The key of a connection's ``router.server.Connection`` in the ASGI scope's ``state``.
CONNECTION_KEY = "shardsched.connection"


class _HeldConnection(Protocol):
    def enter(self) -> None: ...
    def leave(self) -> None: ...


def is_api_path(path: str) -> bool:
    """Whether a request is to the API proper (``/api/``, the ``/internal`` protocol), whose
    calls need a token, as opposed to a route anyone may call (the API's description, the
    console's pages and files, ``/metrics``, an unknown path)."""
    return path.startswith(("/api/", "/internal/")) and path != "/internal/openapi.json"


class _Budget:
    """Slots of one class of request, and (when ``per_client`` is set) each client
    address's share of them."""

    def __init__(self, limit: int, per_client: int | None = None) -> None:
        self.limit = limit
        self.per_client = per_client
        self.used = 0
        self.by_client: dict[str, int] = {}

    def take(self, client: str) -> bool:
        if self.used >= self.limit:
            return False
        if self.per_client is not None:
            held = self.by_client.get(client, 0)
            if held >= self.per_client:
                return False
            self.by_client[client] = held + 1
        self.used += 1
        return True

    def give(self, client: str) -> None:
        self.used -= 1
        if self.per_client is not None:
            left = self.by_client[client] - 1
            if left:
                self.by_client[client] = left
            else:
                del self.by_client[client]


class InFlightLimit:
    """ASGI middleware: at most ``limit`` API requests in the app at once, and apart from
    them at most ``open_limit`` requests to the routes anyone may call, of which one
    client address holds at most ``open_per_client``; beyond, a 503 in the API's error
    shape, without reading the request (load sheds before it queues). Stalled downloads
    of ``/docs`` cannot take the slots that authenticated calls need. It also tells the
    request's connection that the app holds a request, which lifts the connection's read
    deadline until the app is done with it."""

    def __init__(
        self,
        app: Any,
        limit: int,
        open_limit: int = OPEN_IN_FLIGHT,
        open_per_client: int = OPEN_PER_CLIENT,
    ) -> None:
        self.app = app
        self.limit = limit
        self._api = _Budget(limit)
        self._open = _Budget(open_limit, open_per_client)
        self.active = 0  #: every request in the app, probes included
        self._left = trio.Event()

    @property
    def in_flight(self) -> int:
        """The requests in the app that count against a budget."""
        return self._api.used + self._open.used

    async def idle(self) -> None:
        """Return once no request is in the app."""
        while self.active:
            await self._left.wait()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        conn: _HeldConnection | None = scope.get("state", {}).get(CONNECTION_KEY)
        path = scope.get("path", "")
        budget = None
        if path not in EXEMPT_PATHS:
            budget = self._api if is_api_path(path) else self._open
        client = str((scope.get("client") or ("?",))[0])
        if budget is not None and not budget.take(client):
            body = (
                b'{"error":{"code":"overloaded","message":"too many requests in flight",'
                b'"details":{"limit":%d}}}' % budget.limit
            )
            headers = [
                (b"content-type", b"application/json"),
                (b"retry-after", b"1"),
                (b"content-length", str(len(body)).encode()),
            ]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        self.active += 1
        if conn is not None:
            conn.enter()
        try:
            await self.app(scope, receive, send)
        finally:
            if conn is not None:
                conn.leave()
            if budget is not None:
                budget.give(client)
            self.active -= 1
            self._left.set()
            self._left = trio.Event()
