"""shardsched as a user installs it: a wheel built from the tree, installed into a clean
venv with the extra the docs name for the load-test harness (``[bench]``), no dev extras.
Every command's ``--help`` works (no traceback, no markup meant for the API docs), the
console's and /docs' files are in the wheel and served by ``dev``, and ``bench burst``
runs."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from shardsched.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    out = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _commands(sub, (*prefix, name))
    return out


#: Prints each command's --help (argv: a repr'd list of commands) as the installed
#: ``shardsched`` entry point would, each followed by a NUL; exits non-zero on anything
#: but help's own exit 0.
EVERY_HELP = """
import ast, contextlib, io, sys
from shardsched.cli.main import main
for command in ast.literal_eval(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main([*command, "--help"])
        except SystemExit as stop:
            if stop.code not in (0, None):
                sys.exit(f"{command} --help exited {stop.code}")
    sys.stdout.write(out.getvalue() + "\\0")
"""


def test_the_built_wheel_in_a_clean_venv(tmp_path: Path) -> None:
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
        check=True,
        timeout=600,
        capture_output=True,
    )
    (wheel,) = dist.glob("shardsched-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
    ]
    subprocess.run([*pip, f"{wheel}[bench]"], check=True, timeout=900, capture_output=True)
    exe = str(venv / "bin" / "shardsched")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"

    for command in [(), ("jobs", "create"), ("bench", "burst")]:  # as a user types them
        out = subprocess.run(
            [exe, *command, "--help"], capture_output=True, text=True, env=env, timeout=60
        )
        assert out.returncode == 0, f"{command} --help: {out.stderr[-2000:]}"
        assert "Traceback" not in out.stderr
    # and every command's, in one process of the venv's Python (a process each: 25 s)
    commands = [list(c) for c in _commands(build_parser(with_bench=True))]
    helps = subprocess.run(
        [str(venv / "bin" / "python"), "-c", EVERY_HELP, repr(commands)],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert helps.returncode == 0, helps.stdout[-3000:] + helps.stderr[-3000:]
    shown = helps.stdout.split("\0")
    assert len(shown) == len(commands) + 1, (len(shown), len(commands))
    for command, text in zip(commands, shown, strict=False):
        assert text.strip(), f"{command}: no help"
        assert not re.search(r":(mod|func|class|data):`|``", text), f"{command}: {text}"

    burst = subprocess.run(
        [exe, "bench", "burst", "--jobs", "1000"],
        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert burst.returncode == 0, burst.stdout[-3000:] + burst.stderr[-3000:]

    dev = subprocess.Popen(
        [exe, "dev", "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    try:
        console = None
        assert dev.stdout is not None
        for line in dev.stdout:
            if m := re.search(r"console: (http://\S+)/ui/", line):
                console = m.group(1)
            if "shardsched dev ready" in line:
                break
        assert console, "dev printed no console URL"
        for path in (
            "/ui/login",
            "/ui/assets/app.js",
            "/ui/assets/lib.js",
            "/ui/assets/views.js",
            "/docs/swagger-ui-bundle.js",
        ):
            with urllib.request.urlopen(console + path, timeout=10) as resp:
                assert resp.status == 200 and resp.read()
    finally:
        dev.send_signal(signal.SIGTERM)
        dev.communicate(timeout=60)  # reads the rest and closes the pipe
