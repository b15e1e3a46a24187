"""``/docs``: Swagger UI 5 over ``/openapi.json`` (an OpenAPI 3.1 document, which Swagger
UI 4 cannot render), served from the files vendored in ``assets/swagger-ui`` (no CDN: the
page works on a machine without the internet; ``scripts/vendor_swagger_ui.sh`` refreshes
them, ``SOURCE`` says from where). Only the page, its script, its stylesheet and a tiny
start-up script are served."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from shardsched.router import http

PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>shardsched API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/start.js"></script></body></html>
"""
START = b"""window.ui = SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui",
  persistAuthorization: false, tryItOutEnabled: false});
"""
_FILES = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript"}


_ASSETS = Path(__file__).parent / "assets" / "swagger-ui"


@cache
def _asset(name: str) -> bytes:
    return (_ASSETS / name).read_bytes()


#: The page may not be framed by another site (clickjacking: a page that frames /docs
#: could trick a logged-in reader into its buttons); its files are what they say.
FRAMING = {
    "content-security-policy": "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
}


async def docs_page(request: Request) -> Response:
    return Response(PAGE, media_type="text/html; charset=utf-8", headers=FRAMING)


async def docs_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "start.js":
        return Response(START, media_type="text/javascript", headers=FRAMING)
    if name not in _FILES:
        raise http.ApiError(404, "not_found", f"GET /docs/{name}")
    return Response(
        _asset(name), media_type=_FILES[name], headers={**FRAMING, "cache-control": "max-age=86400"}
    )
