"""Start-up errors are loud and the process waits them out: a node pointed at a Redis that
refuses it says so as an error, with what to do, keeps retrying, and becomes ready once
the operator fixes Redis."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REDIS_SERVER, child_env, shardsched_cmd
from shardsched.runtime.redis_server import free_port
from waits import start_logged


@pytest.mark.slow  # out of the default run, which stays near 8 min
def test_a_node_refused_by_redis_logs_what_to_do_and_becomes_ready_once_fixed(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = start_logged(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--requirepass",
            "sekret",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        tmp_path / "redis.log",
    )
    try:
        server.wait_for_sync("Ready to accept connections", timeout=10)
        node = start_logged(
            shardsched_cmd(
                "node",
                "--redis",
                f"redis://127.0.0.1:{port}/0",
                "--no-http",
                "--shards",
                "4",
                "--log-format",
                "text",
            ),
            tmp_path / "node.log",
            env=child_env(),
        )
        try:
            line = node.wait_for_sync("ERROR", timeout=10)
            first = node.mark()
            text = node.text()
            assert "NOAUTH" in text and "put it in the URL" in text, text
            with pytest.raises(subprocess.TimeoutExpired):  # waits out 2 s: it must not exit
                node.proc.wait(timeout=2)
            assert "ready" not in node.text(), line
            subprocess.run(
                [
                    "redis-cli",
                    "-p",
                    str(port),
                    "-a",
                    "sekret",
                    "--no-auth-warning",
                    "CONFIG",
                    "SET",
                    "requirepass",
                    "",
                ],
                check=True,
                capture_output=True,
            )
            node.wait_for_sync("ready", timeout=30, start=first)
        finally:
            node.proc.terminate()
            node.proc.wait(timeout=20)

    finally:
        server.proc.terminate()
        server.proc.wait()


def test_sigterm_stops_a_node_still_waiting_for_redis(tmp_path: Path) -> None:
    """A stop before the node ever reached Redis ends it at once: nothing to drain."""
    port = free_port()  # nothing listens there
    node = start_logged(
        shardsched_cmd("node", "--redis", f"redis://127.0.0.1:{port}/0", "--no-http"),
        tmp_path / "node.log",
        env=child_env(),
    )
    try:
        node.wait_for_sync("ERROR|WARNING|retry|refused", timeout=15)
        node.proc.terminate()
        assert node.proc.wait(timeout=10) in (0, -15, 143), node.text()
    finally:
        if node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait()
