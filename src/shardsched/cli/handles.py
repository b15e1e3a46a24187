"""A job named on the command line by its id or, failing that, by its name: the one job
of that name (``GET /api/v1/jobs?name=``, the shards' index of names). Two jobs of one
name are refused with both ids, never picked between."""

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
