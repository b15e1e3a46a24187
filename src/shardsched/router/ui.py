"""The operator's console at ``/ui``: a login page, then a page of plain JavaScript that is
a client of the public API and its event stream, nothing more (it adds no Redis access of
its own: whatever it shows or does, the API and the CLI can too).

Everything it needs ships in the package (``assets/ui``: no build step, no CDN). The
session is the token in a cookie (:mod:`.session`); with ``--insecure-no-auth`` there is
no login and the page acts as the API's anonymous caller.
"""

from __future__ import annotations

import hmac
import html
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from shardsched.ops.access import tokens
from shardsched.router import http
from shardsched.router.guards import Gate
from shardsched.router.login_links import LoginLinks
from shardsched.router.session import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    SESSION_MAX_AGE_S,
    cookie,
    csrf_of,
    csrf_ok,
    new_login_nonce,
)
from shardsched.store.drive import drive_async

_ASSETS = Path(__file__).parent / "assets" / "ui"
_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
_SERVED = frozenset({"app.js", "lib.js", "views.js", "charts.js", "style.css"})
#: The most a login form may send.
_LOGIN_BODY_MAX = 4096
_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self';"
        " connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # no-referrer would send form posts with Origin: null
    "cache-control": "no-store",
}


@cache
def _read(name: str) -> bytes:
    return (_ASSETS / name).read_bytes()


def _page(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        body,
        status,
        media_type="text/html; charset=utf-8",
        headers={**_SECURITY_HEADERS, **(headers or {})},
    )


class Console:
    """The console's routes, bound to the app's gate (Host, Origin, tokens)."""

    def __init__(self, gate: Gate, links: LoginLinks | None = None) -> None:
        self.gate = gate
        self.links = links or LoginLinks()

    def _secure(self, request: Request) -> bool:
        return request.url.scheme == "https"

    async def _session(self, request: Request) -> str | None:
        """The session's token name, or None without a valid session cookie."""
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            return None
        who = await drive_async(tokens.authenticate(self.gate.dep, token[:200]), self.gate.redis)
        return None if who is None else who.name

    async def root(self, request: Request) -> Response:
        self.gate.check_host_and_origin(request)
        return RedirectResponse("/ui/", 307)

    async def index(self, request: Request) -> Response:
        self.gate.check_host_and_origin(request)
        if self.gate.policy.auth and await self._session(request) is None:
            return RedirectResponse("/ui/login", 303)
        return _page(_read("index.html"))

    async def login_page(self, request: Request, error: str = "", status: int = 200) -> Response:
        self.gate.check_host_and_origin(request)
        nonce = new_login_nonce()
        text = _read("login.html").decode()
        text = text.replace("{{nonce}}", nonce)
        note = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
        text = text.replace("{{error}}", note)
        set_cookie = cookie(LOGIN_COOKIE, nonce, secure=self._secure(request), max_age=600)
        return _page(text.encode(), status, {"set-cookie": set_cookie})

    async def login(self, request: Request) -> Response:
        self.gate.check_host_and_origin(request)
        form = await _form(request)
        nonce = request.cookies.get(LOGIN_COOKIE, "")
        sent = form.get("nonce", "")
        if not nonce or not csrf_ok_nonce(nonce, sent):
            return await self.login_page(request, "The form expired: try again.", 403)
        token = form.get("token", "").strip()
        who = None
        if token and len(token) <= 200:
            who = await drive_async(tokens.authenticate(self.gate.dep, token), self.gate.redis)
        if who is None:
            return await self.login_page(request, "Unknown or revoked token.", 401)
        response = RedirectResponse("/ui/", 303, headers={"cache-control": "no-store"})
        secure = self._secure(request)
        response.headers.append(
            "set-cookie", cookie(SESSION_COOKIE, token, secure=secure, max_age=SESSION_MAX_AGE_S)
        )
        response.headers.append("set-cookie", cookie(LOGIN_COOKIE, "", secure=secure, max_age=0))
        return response

    async def login_link(self, request: Request) -> Response:
        """A one-time login link (``shardsched dev`` prints one): its code, spent here, is
        the session; a used or expired one asks for the token instead."""
        self.gate.check_host_and_origin(request)
        token = self.links.redeem(request.path_params["code"])
        who = None
        if token is not None:
            who = await drive_async(tokens.authenticate(self.gate.dep, token), self.gate.redis)
        if token is None or who is None:
            error = "This login link was used already or has expired: log in with the token."
            return await self.login_page(request, error, 401)
        # the answer sets the session: never kept by a cache, nor sent on as a Referer
        response = RedirectResponse("/ui/", 303, headers={"cache-control": "no-store"})
        set_cookie = cookie(
            SESSION_COOKIE, token, secure=self._secure(request), max_age=SESSION_MAX_AGE_S
        )
        response.headers.append("set-cookie", set_cookie)
        response.headers["referrer-policy"] = "no-referrer"
        return response

    async def logout(self, request: Request) -> Response:
        self.gate.check_host_and_origin(request)
        form = await _form(request)
        token = request.cookies.get(SESSION_COOKIE, "")
        if token and not csrf_ok(token, form.get("csrf")):
            raise http.ApiError(403, "csrf", "log out from the console's own button")
        response = RedirectResponse("/ui/login", 303)
        response.headers.append(
            "set-cookie", cookie(SESSION_COOKIE, "", secure=self._secure(request), max_age=0)
        )
        return response

    async def session(self, request: Request) -> Response:
        """Who the page acts as: name, scopes, the CSRF value its changes send."""
        self.gate.check_host_and_origin(request)
        if not self.gate.policy.auth:
            body = {
                "name": "anonymous",
                "scopes": ["admin"],
                "prefixes": [],
                "csrf": "",
                "auth": False,
            }
            return http.json_response(body)
        token = request.cookies.get(SESSION_COOKIE, "")[:200]
        who = (
            await drive_async(tokens.authenticate(self.gate.dep, token), self.gate.redis)
            if token
            else None
        )
        if who is None:
            raise http.ApiError(401, "unauthorized", "no session: log in at /ui/login")
        body = {
            "name": who.name,
            "scopes": sorted(str(s) for s in who.scopes),
            "prefixes": list(who.prefixes),
            "csrf": csrf_of(token),
            "auth": True,
        }
        return http.json_response(body)

    async def asset(self, request: Request) -> Response:
        self.gate.check_host_and_origin(request)
        name = request.path_params["name"]
        if name not in _SERVED:
            raise http.ApiError(404, "not_found", f"GET /ui/assets/{name}")
        headers = {**_SECURITY_HEADERS, "cache-control": "no-cache"}
        return Response(_read(name), media_type=_TYPES[Path(name).suffix], headers=headers)


def csrf_ok_nonce(nonce: str, sent: str) -> bool:
    return bool(sent) and hmac.compare_digest(nonce.encode(), sent.encode())


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body, small, as a dict of first values."""
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise http.ApiError(415, "unsupported_media_type", "send the form as the page does")
    body = await http.read_raw(request, _LOGIN_BODY_MAX)
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise http.ApiError(400, "bad_form", "not a form") from None
    return {k: v[0] for k, v in fields.items()}
