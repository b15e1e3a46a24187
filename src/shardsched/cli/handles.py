"""A job or DAG named on the command line by its id or, failing that, by its name: the one
job of that name (``GET /api/v1/jobs?name=``, the shards' index of names), the one DAG of
that name. Two of one name are refused with both ids, never picked between."""

from __future__ import annotations

import urllib.parse

from shardsched.cli.http import CliError, Endpoint, request
from shardsched.cli.render import quoted


def job_id_of(api: Endpoint, handle: str) -> str:
    """The id of the job ``handle`` names: a job's id first, else a unique name."""
    try:
        request(api, "GET", f"/api/v1/jobs/{quoted(handle)}")
        return handle
    except CliError as exc:
        if not str(exc).startswith("not_found"):
            raise
        missing = exc
    query = urllib.parse.urlencode({"name": handle, "limit": 5})
    found = [j["job_id"] for j in request(api, "GET", f"/api/v1/jobs?{query}")["jobs"]]
    if not found:
        raise missing
    if len(found) > 1:
        many = ", ".join(found[:4]) + (", …" if len(found) > 4 else "")
        raise CliError(f"{len(found)} jobs are named {handle!r} ({many}): name one by its id")
    return found[0]


def dag_id_of(api: Endpoint, handle: str) -> str:
    """The id of the DAG ``handle`` names: a DAG's id first, else a unique name (``dags
    trigger pipeline``)."""
    try:
        request(api, "GET", f"/api/v1/dags/{quoted(handle)}")
        return handle
    except CliError as exc:
        if not str(exc).startswith("not_found"):
            raise
        missing = exc
    query = urllib.parse.urlencode({"name_prefix": handle, "limit": 100})
    listed = request(api, "GET", f"/api/v1/dags?{query}")["dags"]
    found = [d["dag_id"] for d in listed if d["name"] == handle]
    if not found:
        raise missing
    if len(found) > 1:
        many = ", ".join(found[:4]) + (", …" if len(found) > 4 else "")
        raise CliError(f"{len(found)} DAGs are named {handle!r} ({many}): name one by its id")
    return found[0]


def dag_run_id_of(api: Endpoint, handle: str) -> str:
    """A DAG run named by its id, or by its DAG's name and its tick (``pipeline:t3``)."""
    dag, sep, tick = handle.rpartition(":")
    if not sep or not dag:
        return handle
    return f"{dag_id_of(api, dag)}:{tick}"
