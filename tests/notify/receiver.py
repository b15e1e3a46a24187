"""A real HTTP receiver on loopback for notification tests: records every request and
answers as told (a status per request, in order; then 200)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Receiver:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: list[int] = []  #: the statuses of the next requests (then 200)
        self.url = ""

    def bodies(self) -> list[Any]:
        return [json.loads(r["body"]) for r in self.requests]

    def ok(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["status"] == 200]


@contextmanager
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            with lock:
                status = rec.answers.pop(0) if rec.answers else 200
                rec.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body,
                     "status": status}
                )  # fmt: skip
            self.send_response(status)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
