"""The OpenAPI document, and schemathesis against the live worker protocol: no input it
can generate gets a 5xx, and every answer conforms to the document (issue #7). The public
API's run is tests/router/test_openapi_conformance.py (slow)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import trio
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from conftest import RedisServer, child_env, start_api_node
from shardsched.router.openapi import OPERATIONS, openapi_document

internal_schema = schemathesis.openapi.from_dict(openapi_document(internal=True))


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
    internal = httpx.get(f"{live_api}/internal/openapi.json").json()
    assert internal == openapi_document(internal=True)
    from shardsched.router.app import create_app

    app = create_app(None, None)  # routes only, never called
    routes = {
        (method.lower(), route.path)
        for route in app.routes
        for method in (route.methods or ())
        if method != "HEAD"
        and route.path not in ("/openapi.json", "/internal/openapi.json", "/docs", "/docs/{name}")
        and route.path != "/"
        and not route.path.startswith("/ui")  # the console's pages (router/ui.py)
    }
    documented = {(op.method, op.path) for op in OPERATIONS}
    assert routes == documented
    # the worker protocol is described apart from the public API
    assert not [p for p in served["paths"] if p.startswith("/internal/")]
    assert internal["paths"] and all(p.startswith("/internal/") for p in internal["paths"])
    assert {(m, p) for p, item in served["paths"].items() for m in item} | {
        (m, p) for p, item in internal["paths"].items() for m in item
    } == documented


def test_a_generator_can_use_it() -> None:
    """Readable, unique operationIds; every timestamp a date-time; path parameters named
    as in the path; an event stream described as one."""
    doc = openapi_document()
    ids = [item["operationId"] for path in doc["paths"].values() for item in path.values()]
    assert len(ids) == len(set(ids)) and "getJob" in ids and "listRuns" in ids
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+)*", i) for i in ids), ids
    stamps = 0
    for name, schema in doc["components"]["schemas"].items():
        for field, prop in schema.get("properties", {}).items():
            if field.endswith("_at") or field in ("scheduled_for", "valid_from", "valid_until"):
                options = prop.get("anyOf", [prop])
                strings = [o for o in options if o.get("type") == "string"]
                assert strings and all(o.get("format") == "date-time" for o in strings), (
                    name,
                    field,
                    prop,
                )
                stamps += 1
    assert stamps > 20
    for path, item in doc["paths"].items():
        names = set(re.findall(r"{([^}]+)}", path))
        for op in item.values():
            given = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert given == names, (path, given)
            if p_since := [p for p in op.get("parameters", []) if p["name"] == "since"]:
                assert p_since[0]["schema"].get("format") == "date-time", path
    stream = doc["paths"]["/api/v1/runs/{run_id}/output/stream"]["get"]["responses"]["200"]
    assert "text/event-stream" in stream["content"]
    assert set(doc["paths"]["/api/v1/jobs/{job_id}"]["put"]["responses"]) >= {"200", "201"}


def test_swagger_ui_at_docs(live_api: str) -> None:
    page = httpx.get(f"{live_api}/docs")
    assert page.status_code == 200 and "swagger-ui-bundle.js" in page.text
    # no other site may frame it (clickjacking), in the old header and the new
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    script = httpx.get(f"{live_api}/docs/swagger-ui-bundle.js")
    assert script.status_code == 200 and len(script.content) > 100_000
    assert httpx.get(f"{live_api}/docs/swagger-ui.css").status_code == 200
    assert "/openapi.json" in httpx.get(f"{live_api}/docs/start.js").text
    for name in ("index.html", "..%2F..%2Fpyproject.toml", "swagger-ui.js.map"):
        assert httpx.get(f"{live_api}/docs/{name}").status_code == 404, name


@internal_schema.parametrize()
@settings(
    max_examples=int(os.environ.get("SHARDSCHED_FUZZ_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_worker_protocol_conforms(case: schemathesis.Case, live_api: str) -> None:
    case.call_and_validate(base_url=live_api, excluded_checks=[positive_data_acceptance])


TOUR_THROUGH_A_GENERATED_CLIENT = """
import datetime, sys, time
from generated import AuthenticatedClient
from generated.api.jobs import create_job, get_job, put_job, trigger_job
from generated.api.runs import get_run, get_run_output, list_runs
from generated.models import CronSchedule, CronScheduleType, JobSpec, RetryPolicy

client = AuthenticatedClient(base_url=sys.argv[1], token=sys.argv[2])
spec = JobSpec(
    name="hello",
    command="echo hello from $SHARDSCHED_RUN_ID",
    schedule=CronSchedule(
        type_=CronScheduleType.CRON, expression="*/5 * * * *", timezone="Europe/Berlin"
    ),
    retry_policy=RetryPolicy(max_attempts=3, base_s=10),
)
created = create_job.sync(client=client, body=spec)
assert isinstance(created.next_run_at, datetime.datetime), created
job = get_job.sync(created.job_id, client=client)
assert job.name == "hello" and isinstance(job.created_at, datetime.datetime)
run = trigger_job.sync(created.job_id, client=client)
for _ in range(100):
    got = get_run.sync(run.run_id, client=client)
    if got.state.value == "succeeded":
        break
    time.sleep(0.1)  # the tour polls as a user's script would: the run to end
assert got.state.value == "succeeded" and isinstance(got.finished_at, datetime.datetime), got
page = list_runs.sync(created.job_id, client=client, limit=5)
assert [r.run_id for r in page.runs] == [run.run_id]
out = get_run_output.sync(run.run_id, client=client)
assert out.output == f"hello from {run.run_id}\\n", out.output
put = put_job.sync_detailed("tour-put", client=client, body=spec)
assert put.status_code == 201 and put.parsed.job_id == "tour-put"
print("ok")
"""


async def test_a_generated_client_runs_the_tour(node, worker, http, tmp_path) -> None:
    """openapi-python-client generates a client from the served document; the
    tour's steps run through it (typed models, datetimes parsed)."""
    doc = tmp_path / "openapi.json"
    doc.write_text((await http.get("/openapi.json")).text)
    env = {**child_env(), "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    generator = os.path.join(os.path.dirname(sys.executable), "openapi-python-client")
    made = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [
                generator,
                "generate",
                "--path",
                str(doc),
                "--output-path",
                str(tmp_path / "generated"),
                "--meta",
                "none",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Warning" not in made.stdout + made.stderr, made.stdout + made.stderr
    script = tmp_path / "tour.py"
    script.write_text(TOUR_THROUGH_A_GENERATED_CLIENT)
    token = http.headers["authorization"].removeprefix("Bearer ")
    ran = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, str(script), str(http.base_url), token],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=60,
        )
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stdout + ran.stderr
