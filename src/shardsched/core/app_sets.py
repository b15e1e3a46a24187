"""Which apply set a job or DAG belongs to, and the rule that keeps an app's own to its
deploys (the label ``apply-set: app:<name>``; core/apps.py declares apps, ops/apps
deploys them, ops/jobs and ops/dags call :func:`check_owner` on every write)."""

from __future__ import annotations

import re

from shardsched.core.errors import ConflictError, ValidationError

#: The label that says which apply set (here: which app) a job or DAG belongs to.
APPLY_SET = "apply-set"
APP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$(?!\n)")


def apply_set_of(app: str) -> str:
    """The apply set (label value) of an app's jobs and DAGs."""
    return f"app:{app}"


def app_set_of(labels: dict[str, str] | None) -> str:
    """The app set (``app:<name>``) that owns a job or DAG with these labels ('' none)."""
    value = (labels or {}).get(APPLY_SET, "")
    return value if value.startswith("app:") else ""


def check_owner(
    before: dict[str, str] | None, after: dict[str, str] | None, writer: str = ""
) -> None:
    """A write of labels ``after`` over ``before`` (None: a new one) keeps an app's set
    to its deploys: by hand (``writer`` '') the label ``apply-set: app:…`` may be neither
    given nor taken away (a job or DAG of an app stays its own, and what is not an app's
    cannot be pruned by its next deploy); a deploy (``writer``: its set) writes its own."""
    was, now = app_set_of(before), app_set_of(after)
    if writer or now == was:
        return
    if now:
        raise ValidationError(
            f"the label {APPLY_SET}={now} marks an app's own: only `shardsched deploy` of"
            " that app gives it",
            "$.labels",
        )
    raise ValidationError(
        f"this belongs to app {was[4:]!r} (label {APPLY_SET}={was}), which keeps it: change"
        " it by deploying the app, or delete it",
        "$.labels",
    )


def check_app_name(name: str) -> None:
    if not isinstance(name, str) or not APP_NAME.match(name):
        raise ValidationError(
            "an app's name is letters, digits, '_' and '-' (at most 63), starting with a"
            f" letter or digit, not {name!r}",
            "$.app",
        )


def check_hand_change(labels: dict[str, str] | None, any_id: str, writer: str = "") -> None:
    """A change of definition by hand (``writer`` '') of a job or DAG an app owns is
    refused (ConflictError): its code is where it is defined, and its next deploy would
    put that back. Pausing, resuming, triggering and deleting it stay open."""
    owner = app_set_of(labels)
    if owner and not writer:
        raise ConflictError(
            f"{any_id!r} belongs to app {owner[4:]!r}: its definition is changed in its"
            " code and deployed (`shardsched deploy`); pause, resume, trigger or delete it"
            " here"
        )
