"""One HTTP route as data: method, path, summary, body, query, answer, errors, the scope a
token needs and the handler that answers it (the table itself is :mod:`.routes`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from shardsched.core.access import Scope

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
    #: the :class:`~shardsched.router.app.Api` method that answers it
    handler: str = ""
    #: the scope a token needs; None: open to anyone (health, readiness, metrics)
    scope: Scope | Literal["derived"] | None = "derived"
    #: the OpenAPI operationId's words (default: the handler's name), as snake_case
    operation_id: str = ""

    def needed(self) -> Scope | None:
        """``/internal`` wants ``worker``; other GETs ``read``, other methods ``write``."""
        if self.scope != "derived":
            return self.scope
        if self.path.startswith("/internal/"):
            return Scope.WORKER
        return Scope.READ if self.method == "get" else Scope.WRITE
