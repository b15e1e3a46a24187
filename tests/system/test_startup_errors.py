"""Start-up errors are loud and the process waits them out: a node pointed at a Redis that
refuses it says so as an error, with what to do, keeps retrying, and becomes ready once
the operator fixes Redis."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from conftest import REDIS_SERVER, child_env, shardsched_cmd
from shardsched.runtime.redis_server import free_port


def test_a_node_refused_by_redis_logs_what_to_do_and_becomes_ready_once_fixed(
    tmp_path: Path,
) -> None:
    port = free_port()
    server = subprocess.Popen(
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
        stdout=subprocess.DEVNULL,
    )
    log = tmp_path / "node.log"
    try:
        time.sleep(0.3)
        with log.open("wb") as out:
            node = subprocess.Popen(
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
                stdout=out,
                stderr=subprocess.STDOUT,
                env=child_env(),
            )
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "ERROR" not in log.read_text():
                time.sleep(0.1)
            text = log.read_text()
            assert "ERROR" in text and "NOAUTH" in text and "put it in the URL" in text, text
            time.sleep(2)
            assert node.poll() is None, "the node must wait for Redis, not exit"
            assert "ready" not in log.read_text()
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
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and "ready" not in log.read_text():
                time.sleep(0.1)
            assert "ready" in log.read_text(), log.read_text()[-2000:]
        finally:
            node.terminate()
            node.wait(timeout=20)
    finally:
        server.terminate()
        server.wait()
