"""Webhooks: a name whose signed requests become events (core/events.py), its secrets
(two while rotating), where a request's idempotency key is, and the signature
arithmetic: HMAC-SHA256 over ``<t>.<body>``, checked against each secret in constant
time. Pure: the window is judged on the server's clock (lua/store_event.lua)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

import msgspec

from shardsched.core.events import EventName, FieldPath

#: A hook's name: its path ``/api/v1/hooks/{name}``.
HookName = Annotated[
    str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$(?!\n)")
]
#: A signed hook's timestamp must be this close to the server's clock (either way).
REPLAY_WINDOW_S = 300
#: The header a hook's sender signs with: ``t=<unix seconds>,v1=<hex HMAC-SHA256>``.
SIGNATURE_HEADER = "shardsched-signature"

#: A hook's secret: what its sender and the service share (16 to 256 printable bytes).
#: (The bounds are the pattern's own: a generator of examples, schemathesis, then writes
#: strings that fit, where a length beside the pattern had it throw most away.)
Secret = Annotated[str, msgspec.Meta(pattern=r"^[!-~]{16,256}$(?!\n)")]
#: A request header's name (its idempotency key's).
HeaderName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9-]{1,100}$(?!\n)")]


class HookSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The body of ``PUT /api/v1/hooks/{name}``: its secrets (two while rotating: a
    signature by either is good), the event its requests become (default
    ``hook.<name>``), and where a request's idempotency key is (a header, or a field of
    the payload; neither: the signature, so a resent request is a duplicate)."""

    secrets: Annotated[list[Secret], msgspec.Meta(min_length=1, max_length=2)]
    event: EventName | None = None
    idempotency_header: HeaderName | None = None
    idempotency_field: FieldPath | None = None


class Hook(msgspec.Struct, omit_defaults=True):
    """A hook as the API answers it: never its secrets, only how many it has."""

    name: str
    event: str
    secrets: int
    url_path: str
    idempotency_header: str | None = None
    idempotency_field: str | None = None


class HookList(msgspec.Struct):
    hooks: list[Hook]


def hook_event(name: str, spec: HookSpec) -> str:
    return spec.event or f"hook.{name}"


def hook_view(name: str, spec: HookSpec) -> Hook:
    return Hook(
        name=name,
        event=hook_event(name, spec),
        secrets=len(spec.secrets),
        url_path=f"/api/v1/hooks/{name}",
        idempotency_header=spec.idempotency_header,
        idempotency_field=spec.idempotency_field,
    )


class SignatureError(ValueError):
    """A hook request's signature is missing, malformed or made with no secret of the
    hook (the message says which, never a secret)."""


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp`` (unix seconds):
    what a sender computes (docs/events.md has it in shell and Python)."""
    return f"t={timestamp},v1={_digest(secret, str(timestamp), body)}"


def _digest(secret: str, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 of ``<t>.<body>``, ``t`` as the header writes it (its very digits)."""
    message = timestamp.encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(secrets: list[str], header: str | None, body: bytes) -> str:
    """The signed timestamp (unix seconds, as the header writes it) when ``header`` signs
    ``body`` with one of the secrets; SignatureError otherwise. The window is the
    server's clock's to judge (lua/store_event.lua), not this host's."""
    if not header:
        raise SignatureError(f"the request is not signed: no {SIGNATURE_HEADER} header")
    timestamp: str | None = None
    given: list[str] = []
    for part in header.split(","):
        key, eq, value = part.strip().partition("=")
        if not eq:
            raise SignatureError(f"{SIGNATURE_HEADER} is t=<unix seconds>,v1=<hex>")
        if key == "t":
            if not value.isascii() or not value.isdigit() or len(value) > 12:
                raise SignatureError("the signature's timestamp t= is not unix seconds")
            timestamp = value
        elif key == "v1":
            given.append(value)
    if timestamp is None or not given:
        raise SignatureError(f"{SIGNATURE_HEADER} needs t= and at least one v1=")
    for secret in secrets:
        expected = _digest(secret, timestamp, body)
        if any(hmac.compare_digest(expected.encode(), v.encode()) for v in given):
            return timestamp
    raise SignatureError("the signature does not match the body with any secret of the hook")


def signature_key(timestamp: str, body: bytes) -> str:
    """An idempotency key from what the signature vouches for (a hook with no other key):
    its timestamp and body, so the same request sent again is the same key however its
    header is written (the pairs reordered, another valid v1= added)."""
    return "sig-" + hashlib.sha256(timestamp.encode() + b"." + body).hexdigest()[:40]
