"""The documentation stands on its own (issue #17): the generated references are current,
the site builds with no broken link, nothing cites a file outside the project, and the
deployment files start what they say (the systemd units verified by systemd itself; every
command line in them parsed by the CLI's own parser)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from shardsched.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_generated_pages_are_current() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_the_site_builds_without_a_broken_link(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    out = subprocess.run(
        [str(mkdocs), "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for page in ("index.html", "tour/index.html", "troubleshooting/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    reference = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "shardsched apply" in reference and "--dry-run" in reference


def test_the_readme_is_a_front_door() -> None:
    """What it is, the two commands first, a short example, and links into docs/ (issue
    #49): the manual lives in docs/, where the site builds it; every link resolves."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    first_block = re.search(r"```\n(.*?)```", readme, re.DOTALL)
    assert first_block is not None
    assert first_block.group(1).splitlines() == [
        "bash scripts/setup.sh && .venv/bin/shardsched dev",
        "bash scripts/setup.sh --tests && .venv/bin/python -m pytest -q -n 4",
    ]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert first_block.group(1).splitlines()[1] in ci  # CI runs the README's test command
    targets = re.findall(r"\]\(([^)#]+)[^)]*\)", readme)
    assert len(targets) >= 10
    for target in targets:
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def test_nothing_cites_a_file_outside_the_project() -> None:
    texts = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *ROOT.glob("docs/**/*.md")]
    texts += [*ROOT.glob("src/**/*.py"), *ROOT.glob("lua/**/*.lua")]
    for path in texts:
        text = path.read_text()
        assert not re.search(r"DESIGN(\.md| §)|\.\./shared|seeds/", text), path


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    assert Path(words[0]).name == "shardsched", command
    return words[1:]


def test_deployment_files_start_what_they_say(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SHARDSCHED_REDIS_URL", "redis://redis:6379/0")  # their env file's
    parser = build_parser(with_bench=False)
    units = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
    assert len(units) == 2
    local = []
    for unit in units:
        text = unit.read_text()
        (exec_start,) = re.findall(r"^ExecStart=(.*)$", text, re.MULTILINE)
        argv = [a.replace("%H", "host").replace("%i", "1") for a in _argv(exec_start)]
        parser.parse_args(argv)  # every flag exists (SystemExit otherwise)
        here = text.replace(
            "/opt/shardsched/.venv/bin/shardsched",
            str(Path(sys.executable).with_name("shardsched")),
        )
        here = here.replace("User=shardsched", "User=root")
        name = unit.name.replace("@.", "@1.")
        (tmp_path / name).write_text(here)
        local.append(str(tmp_path / name))
    verify = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *local], capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    for name in ("node", "worker"):
        parser.parse_args(compose["services"][name]["command"])
    redis_cmd = compose["services"]["redis"]["command"]
    assert "noeviction" in redis_cmd and "always" in redis_cmd
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    for source in re.findall(r"^COPY (\S+(?: \S+)*) \S+$", dockerfile, re.MULTILINE):
        for item in source.split():
            assert (ROOT / item).exists(), item
