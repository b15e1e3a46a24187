"""scripts/setup.sh never harms the host: it stops, disables or kills nothing the user
already runs (it used to `systemctl disable --now redis-server`), and test-only tools are
installed only by its --tests step, which names them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SETUP = Path(__file__).resolve().parents[2] / "scripts" / "setup.sh"
#: A command that changes a running service or process: any systemctl verb but the
#: read-only is-active, service, invoke-rc.d, kill and its kin.
HARMFUL = re.compile(
    r"(^|[;&|(]\s*|\$sudo\s+)(systemctl\s+(?!is-active)\S+|service\s+\S+\s+(stop|restart)"
    r"|invoke-rc\.d|kill|pkill|killall)\b"
)


def commands(text: str) -> list[str]:
    """The script's command lines, without comments and without what echo prints."""
    out = []
    for line in text.splitlines():
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        code = re.sub(r'echo\s+("[^"]*"\s*)+(\\)?', "echo", code)
        if code.strip() and not code.strip().startswith('"'):
            out.append(code)
    return out


def test_setup_stops_and_disables_nothing() -> None:
    bad = [line for line in commands(SETUP.read_text()) if HARMFUL.search(line)]
    assert not bad, bad


def test_the_check_finds_what_main_used_to_do() -> None:
    old = "  $sudo systemctl disable --now redis-server >/dev/null 2>&1 || true\n"
    assert [line for line in commands(old) if HARMFUL.search(line)]


def test_test_tools_come_only_with_the_tests_step() -> None:
    text = SETUP.read_text()
    run_part, _, tests_part = text.partition("if (( tests )); then")
    for tool in ("valgrind", "fish", "zsh", "faketime", "gcc"):
        assert f"missing+=({tool}" in tests_part, tool
        assert tool not in "\n".join(commands(run_part)), tool
    bad = subprocess.run(["bash", str(SETUP), "--nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
