"""``shardsched jobs edit ID`` / ``dags edit ID``: the definition in ``$VISUAL`` or
``$EDITOR`` as YAML, put back as a new version with ``If-Match`` (the version read), so
an edit never overwrites a change someone made meanwhile."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shardsched.cli.definitions import KINDS, current, normalised, yaml_lines, yaml_module
from shardsched.cli.handles import job_id_of
from shardsched.cli.http import CliError, exchange
from shardsched.cli.render import quoted


def run_edit(args: argparse.Namespace, kind: str) -> tuple[Any, Callable[[Any], str]]:
    """Open the definition in $VISUAL or $EDITOR, then put it back with If-Match: the
    version read, so an edit made meanwhile by someone else is not overwritten."""
    any_id = job_id_of(args.api, args.job_id) if kind == "job" else args.dag_id
    path = f"/api/v1/{KINDS[kind].plural}/{quoted(any_id)}"
    now, view = current(args.api, kind, any_id)
    if now is None:
        raise CliError(f"{kind} {any_id} is {'deleted' if view else 'not found'}")
    assert view is not None
    version = view["version"]
    head = (
        f"# {kind} {any_id}, version {version}. Save and quit to apply it as a new version;\n"
        "# leave it unchanged, or empty, to change nothing.\n"
    )
    text = head + "".join(line + "\n" for line in yaml_lines(now))
    shown, error = text, None
    while True:
        edited = _strip_errors(_edit(shown))
        if error is not None and edited == _strip_errors(shown):
            kept = _keep(edited)  # saved as it was shown: the user gives up on the fix
            raise CliError(f"{error} (nothing changed; your edit is kept in {kept})")
        if not edited.strip() or edited == text:
            return {"id": any_id, "outcome": "unchanged", "version": version}, _edited
        try:
            return _put(args, kind, any_id, path, edited, version)
        except _Invalid as exc:  # reopened with the error above the edit, as kubectl does
            error = str(exc)
            shown = "".join(f"{ERROR_MARK}{line}\n" for line in error.splitlines()) + edited


#: How an error is shown above a reopened edit (and taken off again before it is read).
ERROR_MARK = "# error: "


class _Invalid(Exception):
    """The edit cannot be applied as it is: the user may fix it in the editor."""


def _strip_errors(text: str) -> str:
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith(ERROR_MARK):
        lines.pop(0)
    return "".join(lines)


def _keep(text: str) -> str:
    with tempfile.NamedTemporaryFile(
        "w", prefix="shardsched-edit-", suffix=".yaml", delete=False, encoding="utf-8"
    ) as f:
        f.write(text)
    return f.name


def _put(
    args: argparse.Namespace, kind: str, any_id: str, path: str, edited: str, version: int
) -> tuple[Any, Callable[[Any], str]]:
    yaml = yaml_module()
    from shardsched.runtime import yaml12

    try:
        body = yaml12.load(edited)
    except yaml.YAMLError as exc:
        raise _Invalid(f"not YAML: {exc}") from None
    if not isinstance(body, dict):
        raise _Invalid("the edited definition is not a mapping")
    try:
        normalised(kind, body, "the edited definition", any_id)
        out, headers = exchange(args.api, "PUT", path, body, {"if-match": f'"{version}"'})
    except CliError as exc:
        if str(exc).startswith("precondition_failed"):
            raise CliError(f"{kind} {any_id} changed while you edited it: {exc}") from None
        if str(exc).startswith(("validation_error", "invalid", "the edited definition")):
            raise _Invalid(str(exc)) from None
        raise
    outcome = headers.get("shardsched-outcome", "updated")
    return {"id": any_id, "outcome": outcome, "version": out["version"]}, _edited


def _edited(o: Any) -> str:
    return f"{o['id']}  {o['outcome']}  version {o['version']}"


def _edit(text: str) -> str:
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        try:
            code = subprocess.call([*shlex.split(editor), f.name])
        except OSError as exc:
            raise CliError(f"cannot start the editor {editor!r}: {exc.strerror}") from None
        if code != 0:
            raise CliError(f"the editor {editor!r} exited with status {code}: nothing changed")
        return Path(f.name).read_text(encoding="utf-8")
    finally:
        os.unlink(f.name)
