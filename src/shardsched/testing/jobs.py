"""The jobs a virtual clock runs, however a test has them: ``JobSpec`` objects (a list, or
a dict by id), an apply file or folder (YAML or JSON, as ``shardsched apply -f`` takes
it), or anything with a ``specs()`` method (a ``shardsched.App``'s jobs)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from shardsched.core.models import JobSpec
from shardsched.core.validation import validate_spec

#: JobSpecs (a list, a dict by id), an apply file or folder, or something with specs()
JobsLike = Any
_SLUG = re.compile(r"[^A-Za-z0-9_-]+")


def named_specs(jobs: JobsLike) -> list[tuple[str, JobSpec]]:
    """(id, validated spec) of each job: its ``id``, its key, else one made of its name
    (which is what its spread offset and ``H`` fields are hashed from)."""
    if isinstance(jobs, str | Path):
        pairs = _from_files(Path(jobs))
    elif hasattr(jobs, "specs"):
        pairs = list(jobs.specs())
    elif isinstance(jobs, JobSpec):
        pairs = [(None, jobs)]
    elif isinstance(jobs, Mapping):
        pairs = list(jobs.items())
    else:
        pairs = [(None, spec) for spec in jobs]
    out = []
    for job_id, spec in pairs:
        if not isinstance(spec, JobSpec):
            raise TypeError(f"not a JobSpec: {spec!r}")
        validate_spec(spec)
        if spec.schedule is None:
            raise ValueError(f"job {spec.name!r} has no schedule (a DAG's task runs by its DAG)")
        out.append((job_id or spec.id or _SLUG.sub("-", spec.name), spec))
    seen: set[str] = set()
    for job_id, _spec in out:  # one job twice would double every tick, silently
        if job_id in seen:
            raise ValueError(f"job {job_id!r} is given twice (give each its own id)")
        seen.add(job_id)
    return out


def _from_files(path: Path) -> list[tuple[str | None, JobSpec]]:
    files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    out: list[tuple[str | None, JobSpec]] = []
    for file in files if path.is_dir() else [path]:
        text = file.read_text(encoding="utf-8")
        if file.suffix == ".json":
            loaded = json.loads(text)
            documents = loaded if isinstance(loaded, list) else [loaded]
        else:
            from shardsched.runtime import yaml12

            documents = [d for d in yaml12.load_all(text) if d is not None]
        for doc in documents:
            if not isinstance(doc, dict) or doc.get("kind", "job") != "job":
                continue
            body = {k: v for k, v in doc.items() if k not in ("kind", "id", "paused")}
            out.append((doc.get("id"), msgspec.convert(body, JobSpec)))
    return out
