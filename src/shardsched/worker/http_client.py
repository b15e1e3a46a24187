"""A small reference client of the internal worker protocol (stdlib only).

For workers that cannot reach Redis: heartbeat, claim, renew and complete over HTTP,
with a token of the ``worker`` scope.
Every method raises :class:`ProtocolError` with the server's error body on a 4xx/5xx.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from shardsched.core.errors import ShardschedError


class ProtocolError(ShardschedError):
    """Raised when the router refuses a worker call (409: the worker lost the run)."""

    def __init__(self, status: int, body: dict) -> None:
        super().__init__(f"{status}: {body.get('error', body)}")
        self.status = status
        self.body = body


class HttpWorkerClient:
    def __init__(
        self, base_url: str, worker_id: str, token: str | None = None, timeout: float = 10.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.worker_id = worker_id
        self.timeout = timeout
        self.headers = {"content-type": "application/json"}
        if token is not None:
            self.headers["authorization"] = f"Bearer {token}"

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode(),
            headers=self.headers,
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ProtocolError(exc.code, json.loads(exc.read() or b"{}")) from None

    def heartbeat(self, capacity: int, capacity_free: int) -> dict[str, Any]:
        return self._post(
            f"/internal/workers/{self.worker_id}/heartbeat",
            {"capacity": capacity, "capacity_free": capacity_free},
        )

    def claim(self, max_runs: int = 1) -> list[dict[str, Any]]:
        body = {"worker_id": self.worker_id, "max_runs": max_runs}
        return self._post("/internal/runs/claim", body)["runs"]

    def renew(self, run: dict[str, Any]) -> dict[str, Any]:
        body = {"worker_id": self.worker_id, "entry_id": run["entry_id"], "token": run["token"]}
        return self._post(f"/internal/runs/{run['run_id']}/lease/renew", body)

    def complete(
        self,
        run: dict[str, Any],
        success: bool,
        exit_code: int | None = None,
        reason: str | None = None,
        output: str = "",
    ) -> dict[str, Any]:
        body = {
            "worker_id": self.worker_id,
            "entry_id": run["entry_id"],
            "token": run["token"],
            "status": "success" if success else "failure",
            "exit_code": exit_code,
            "reason": reason,
            "output": output,
        }
        return self._post(f"/internal/runs/{run['run_id']}/complete", body)
