"""schemathesis against the live public API (slow): no input it can generate gets a 5xx,
and every answer conforms to the OpenAPI document (issue #7). Its own module because
schemathesis builds its coverage examples when it collects (18 s of CPU): the default run
does not collect it at all (tests/conftest.py, ``SLOW_ONLY_MODULES``).

``SHARDSCHED_FUZZ_EXAMPLES`` sets the examples per operation; ``SHARDSCHED_FUZZ_PART``
(``i/n``) keeps the i-th of n parts of the operations, so the 200-example run spreads over
the slow step's workers."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from conftest import RedisServer, child_env, start_api_node
from shardsched.router.openapi import openapi_document

pytestmark = pytest.mark.slow
PARTS = 4


def operations_of_part(document: dict, part: str) -> list[str]:
    """The operation names ("GET /api/v1/jobs") of part ``i/n``: every n-th, from the i-th."""
    i, n = (int(x) for x in part.split("/"))
    names = sorted(f"{m.upper()} {path}" for path, item in document["paths"].items() for m in item)
    return names[i - 1 :: n]


schema = schemathesis.openapi.from_dict(openapi_document())
if part := os.environ.get("SHARDSCHED_FUZZ_PART"):
    schema = schema.include(name=operations_of_part(openapi_document(), part))


@pytest.fixture(scope="module")
def live_api(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A node process serving the API on its own namespace."""
    log = tmp_path_factory.mktemp("openapi") / "node.log"
    proc, base = start_api_node(redis_server, "oa" + uuid.uuid4().hex[:8], log)
    yield base
    proc.terminate()
    proc.wait(timeout=10)


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


def test_the_parts_cover_every_operation_once() -> None:
    document = openapi_document()
    parts = [operations_of_part(document, f"{i}/{PARTS}") for i in range(1, PARTS + 1)]
    every = [name for p in parts for name in p]
    assert sorted(every) == sorted(set(every)) and len(every) == sum(
        len(item) for item in document["paths"].values()
    )
    assert all(parts)


@pytest.mark.parametrize("part", [f"{i}/{PARTS}" for i in range(1, PARTS + 1)])
def test_api_conforms_at_200_examples_per_operation(part: str) -> None:
    """The same run as test_api_conforms, at 200 examples per operation (minutes), in
    parts of the operations that run side by side."""
    env = {**child_env(), "SHARDSCHED_FUZZ_EXAMPLES": "200", "SHARDSCHED_FUZZ_PART": part}
    out = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
            "-m", "slow", f"{__file__}::test_api_conforms",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-2000:]
    assert " passed" in out.stdout, out.stdout[-2000:]
