"""``/docs``: Swagger UI over ``/openapi.json``, served from the swagger-ui-bundle package
(no CDN: the page works on a machine without the internet). Only the page, its script,
its stylesheet and a tiny start-up script are served; nothing else of the package."""

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


@cache
def _asset(name: str) -> bytes | None:
    try:
        import swagger_ui_bundle
    except ImportError:
        return None
    return (Path(swagger_ui_bundle.swagger_ui_path) / name).read_bytes()


async def docs_page(request: Request) -> Response:
    return Response(PAGE, media_type="text/html; charset=utf-8")


async def docs_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name == "start.js":
        return Response(START, media_type="text/javascript")
    body = _asset(name) if name in _FILES else None
    if body is None:
        raise http.ApiError(404, "not_found", f"GET /docs/{name}")
    return Response(body, media_type=_FILES[name], headers={"cache-control": "max-age=86400"})
