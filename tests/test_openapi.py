"""The OpenAPI document, and schemathesis against the live API: no input it can generate
gets a 5xx, and every answer conforms to the document (issue #7)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from conftest import RedisServer, child_env, start_api_node
from shardsched.router.openapi import OPERATIONS, openapi_document

schema = schemathesis.openapi.from_dict(openapi_document())


@pytest.fixture(scope="module")
def live_api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A node process serving the API on its own namespace."""
    log = tmp_path_factory.mktemp("openapi") / "node.log"
    proc, base = start_api_node(redis_server, "oa" + uuid.uuid4().hex[:8], log)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def test_document_is_served_and_covers_every_route(live_api: str) -> None:
    served = httpx.get(f"{live_api}/openapi.json").json()
    assert served["openapi"] == "3.1.0" and served == openapi_document()
    from shardsched.router.app import create_app

    app = create_app(None, None)  # routes only, never called
    routes = {
        (method.lower(), route.path)
        for route in app.routes
        for method in (route.methods or ())
        if method != "HEAD" and route.path != "/openapi.json"
    }
    documented = {(op.method, op.path) for op in OPERATIONS}
    assert routes == documented


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("SHARDSCHED_FUZZ_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_conforms(case: schemathesis.Case, live_api: str) -> None:
    # Every default check but "schema-valid data is accepted": a schema-valid body can still
    # be refused with a 422 for what JSON Schema cannot say (cron syntax, time-zone names,
    # a schedule or depends_on required one without the other).
    case.call_and_validate(base_url=live_api, excluded_checks=[positive_data_acceptance])


@pytest.mark.slow
def test_api_conforms_at_200_examples_per_operation() -> None:
    """The same run as test_api_conforms, at 200 examples per operation (minutes)."""
    env = {**child_env(), "SHARDSCHED_FUZZ_EXAMPLES": "200"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_api_conforms",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
