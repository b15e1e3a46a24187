"""Waiting and following from the command line: ``runs wait ID``, ``jobs trigger --wait``
(exit with the job's exit code), ``runs output --follow`` (a running job's output as its
worker writes it, over the API's Server-Sent Events) and ``dags trigger --watch`` (each
task's state as it changes).

Waits poll the API every half second, on the server's answers only (no local clock
decides anything but how long to keep waiting).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

from shardsched.cli import progress, style
from shardsched.cli.create import duration_arg
from shardsched.cli.http import CliError, Endpoint, request
from shardsched.cli.render import page_query, quoted

POLL_S = 0.5
TERMINAL = {"succeeded", "failed", "dead_letter", "skipped", "cancelled"}
#: ``timeout`` (1)'s status when the wait ran out.
TIMED_OUT = 124


def exit_status(run: dict[str, Any]) -> int:
    """0 for a success; the job's own exit code for a failure (1 without one)."""
    if run["state"] == "succeeded":
        return 0
    code = run.get("exit_code")
    return code if isinstance(code, int) and 0 < code < 256 else 1


def wait_run(api: Endpoint, rid: str, timeout_s: float | None) -> dict[str, Any]:
    """The run once its tick is over: through its retries (a failed attempt with a next
    one is followed to that one), to a terminal state. CliError when ``timeout_s`` ran out."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        run = request(api, "GET", f"/api/v1/runs/{quoted(rid)}")
        if run["state"] in TERMINAL:
            if run["state"] == "failed" and run.get("next_run_id"):
                print(
                    f"attempt {run['attempt']} {run['state']} ({run.get('reason') or '-'}),"
                    f" retrying as {run['next_run_id']}",
                    file=sys.stderr,
                )
                rid = run["next_run_id"]
                continue
            return run
        if deadline is not None and time.monotonic() >= deadline:
            raise TimedOut(f"run {rid} is still {run['state']} after {timeout_s:g} s")
        time.sleep(POLL_S)


class TimedOut(CliError):
    """The wait ran out (exit status TIMED_OUT)."""


def events(api: Endpoint, path: str) -> Iterator[tuple[str, Any]]:
    """The (event, JSON data) of a Server-Sent Events answer, as they come."""
    req = urllib.request.Request(
        api.url.rstrip("/") + path, headers={"accept": "text/event-stream"}
    )
    if api.token is not None:
        req.add_header("authorization", f"Bearer {api.token}")
    try:
        reply = urllib.request.urlopen(req, timeout=60)
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())["error"]
        except (ValueError, KeyError, TypeError):
            raise CliError(f"GET {path}: HTTP {exc.code}") from None
        raise CliError(f"{error['code']}: {error['message']}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise CliError(
            f"cannot reach the API at {api.url}: {getattr(exc, 'reason', exc)}"
        ) from None
    with reply:
        event, data = "message", list[str]()
        for raw in reply:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line:
                if data:
                    yield event, json.loads("\n".join(data))
                event, data = "message", list[str]()
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())


def follow_output(api: Endpoint, rid: str) -> dict[str, Any]:
    """Print a run's output as it is written, until the run ends; returns the end event."""
    for event, data in events(api, f"/api/v1/runs/{quoted(rid)}/output/stream"):
        if event == "output":
            if "skipped" in data:
                print(f"[{data['skipped']} bytes not kept]", file=sys.stderr)
            else:
                sys.stdout.write(data["text"])
                sys.stdout.flush()
        elif event == "end":
            return dict(data)
    raise CliError(f"the output stream of {rid} ended before the run did; follow it again")


def watch_dag_run(api: Endpoint, drid: str, timeout_s: float | None) -> dict[str, Any]:
    """Print each task's state as it changes until the DAG run ends; returns the DAG run."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    seen: dict[str, str] = {}
    while True:
        run = request(api, "GET", f"/api/v1/dag-runs/{quoted(drid)}")
        for task in run["tasks"]:
            if seen.get(task["task"]) != task["state"]:
                seen[task["task"]] = task["state"]
                reason = f"  ({task['reason']})" if task.get("reason") else ""
                print(f"{time.strftime('%H:%M:%S')}  {task['task']:<20} {task['state']}{reason}")
                sys.stdout.flush()
        if run["state"] in ("succeeded", "failed", "skipped"):
            return dict(run)
        if deadline is not None and time.monotonic() >= deadline:
            raise TimedOut(f"DAG run {drid} is still {run['state']} after {timeout_s:g} s")
        time.sleep(POLL_S)


def wait_window(
    api: Endpoint, job_id: str, since: str, until: str, ticks: int, timeout_s: float | None
) -> None:
    """Until every tick of the window has a run that ended for good (a bar meanwhile)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with progress.bar("backfilling") as shown:
        while True:
            done, cursor = 0, None
            while True:
                query = page_query(
                    {"since": since, "until": until, "limit": 1000, "cursor": cursor}
                )
                page = request(api, "GET", f"/api/v1/jobs/{quoted(job_id)}/runs{query}")
                done += sum(
                    1 for r in page["runs"] if r["state"] in TERMINAL and not r.get("next_run_id")
                )
                cursor = page.get("next_cursor")
                if not cursor:
                    break
            shown.update(done, ticks)
            if done >= ticks:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimedOut(f"{done} of {ticks} ticks have run after {timeout_s:g} s")
            time.sleep(POLL_S)


def timeout_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=duration_arg,
        default=None,
        metavar="DURATION",
        help=f"give up after this long (exit {TIMED_OUT}); default: wait for ever",
    )


#: The least time between two redraws of a ``--watch`` (a burst of changes is one redraw).
REDRAW_GAP_S = 1.0


def watch_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-w", "--watch", dest="watch_list", action="store_true",
        help="redraw on every change the event stream reports, until Ctrl-C",
    )  # fmt: skip


def watch(draw: Callable[[], tuple[Any, Callable[[Any], str]]], api: Endpoint, output: str) -> int:
    """A list redrawn whenever a run changes state (the API's event stream says when), at
    most every REDRAW_GAP_S, until Ctrl-C: no polling of the list itself."""
    from shardsched.cli.render import formatted

    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
    try:
        stream = events(api, "/api/v1/events/stream")
        while True:
            style.tick()  # "4s ago" from this redraw, not from when the watch began
            out, show = draw()
            sys.stdout.write(clear + formatted(out, output, show) + "\n")
            print(f"(watching, {time.strftime('%H:%M:%S')}: redrawn on every change; Ctrl-C"
                  " stops)", file=sys.stderr)  # fmt: skip
            sys.stdout.flush()
            next_draw = time.monotonic() + REDRAW_GAP_S
            next(stream)  # waits for a change
            wait = next_draw - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # waits out the redraw gap: the changes of a burst are one
    except KeyboardInterrupt:
        return 0
    except StopIteration:
        raise CliError("the event stream ended; watch again") from None
