"""One HTTP route as data: method, path, summary, body, query, answer, errors, the scope a
token needs and the handler that answers it. Each resource's module lists its own routes
beside their handlers; :mod:`.routes` gathers them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from shardsched.core.access import Scope

if TYPE_CHECKING:
    from shardsched.router.context import Handler

BODY_ERRORS = (400, 413, 415, 422)


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    answer: type | None
    status: int = 200
    body: type | None = None
    #: the body may be left out (a trigger's options)
    body_optional: bool = False
    query: type | None = None
    errors: tuple[int, ...] = ()
    tags: tuple[str, ...] = field(default=())
    #: the function that answers it (its name is the operationId's default)
    handler: Handler | None = None
    #: the scope a token needs; None: open to anyone (health, readiness, metrics)
    scope: Scope | Literal["derived"] | None = "derived"
    #: the OpenAPI operationId's words (default: the handler's name), as snake_case
    operation_id: str = ""

    def name(self) -> str:
        """The operationId's words: the one given, else the handler's name."""
        return self.operation_id or getattr(self.handler, "__name__", "")

    def needed(self) -> Scope | None:
        """``/internal`` wants ``worker``; other GETs ``read``, other methods ``write``."""
        if self.scope != "derived":
            return self.scope
        if self.path.startswith("/internal/"):
            return Scope.WORKER
        return Scope.READ if self.method == "get" else Scope.WRITE
