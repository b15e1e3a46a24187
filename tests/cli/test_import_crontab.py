"""``shardsched import crontab``: a user's and a system crontab become apply files; every
line it cannot translate is said on stderr with why; the result applies (its dry run
showing first fires) and imports again to the same ids."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from conftest import child_env, cli, shardsched_cmd
from shardsched.core.crontab_import import read_crontab

USER = r"""# m h dom mon dow command
SHELL=/bin/sh
PATH="/usr/local/bin:/usr/bin:/bin"
MAILTO=ops@example.com
LD_PRELOAD=/tmp/evil.so
30 2 * * * /usr/local/bin/backup.sh --full
*/5 9-17 * * mon-fri curl -s http://127.0.0.1:9/ping
@daily find /tmp -mtime +7 -delete
@reboot /opt/start.sh
0 3 1 * * date +\%F > /tmp/stamp
0 4 * * * mail -s hi root %body text
61 * * * * out-of-range
CRON_TZ=America/New_York
0 6 * * 1 weekly-report
not a line
"""


def test_a_user_crontab_becomes_jobs_and_says_what_it_cannot_translate() -> None:
    out = read_crontab(USER, "alice", "Europe/Berlin")
    by_command = {d["command"]: d for d in out.documents}
    assert list(by_command) == [
        "/usr/local/bin/backup.sh --full",
        "curl -s http://127.0.0.1:9/ping",
        "find /tmp -mtime +7 -delete",
        "date +%F > /tmp/stamp",  # \% is a literal %
        "weekly-report",
    ]
    backup = by_command["/usr/local/bin/backup.sh --full"]
    assert backup["schedule"] == {
        "type": "cron",
        "expression": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "dialect": "debian",  # Debian cron's days and DST
    }
    assert backup["env"] == {"SHELL": "/bin/sh", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert by_command["find /tmp -mtime +7 -delete"]["schedule"]["expression"] == "@daily"
    assert by_command["weekly-report"]["schedule"]["timezone"] == "America/New_York"
    said = "\n".join(out.warnings)
    for line, why in [
        (4, "MAILTO"),
        (5, "LD_PRELOAD is not kept"),
        (9, "@reboot is not translated"),
        (11, "unescaped %"),
        (12, "minute field"),
        (15, "not a crontab line"),
    ]:
        assert f"alice:{line}: " in said and why in said, (line, why, said)
    assert len(out.warnings) == 6
    # the same file imported again names the same jobs
    assert [d["id"] for d in read_crontab(USER, "alice", "Europe/Berlin").documents] == [
        d["id"] for d in out.documents
    ]


def test_a_system_crontab_has_a_user_field() -> None:
    text = (
        "17 * * * * root cd / && run-parts --report /etc/cron.hourly\n"
        "@weekly www-data /srv/rotate\n"
    )
    out = read_crontab(text, "crontab", "UTC", system=True)
    assert [d["command"] for d in out.documents] == [
        "cd / && run-parts --report /etc/cron.hourly",
        "/srv/rotate",
    ]
    assert len(out.warnings) == 2 and "user field (root) is not kept" in out.warnings[0]
    assert "user field (www-data) is not kept" in out.warnings[1], "each user is said"
    # the same line read as a user crontab keeps "root" in the command: said apart
    user = read_crontab(text, "crontab", "UTC")
    assert user.documents[0]["command"].startswith("root cd /")


async def test_imported_crontab_applies_and_shows_first_fires(node, http, tmp_path) -> None:
    crontab = tmp_path / "alice.cron"
    crontab.write_text(USER)
    imported = subprocess.run(
        shardsched_cmd("import", "crontab", str(crontab), "--zone", "Europe/Berlin"),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=30,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr.count("shardsched: alice.cron:") == 6
    documents = [d for d in yaml.safe_load_all(imported.stdout) if d]
    assert len(documents) == 5
    applied = tmp_path / "jobs.yaml"
    applied.write_text(imported.stdout)
    dry = await cli(
        http,
        "--api",
        str(http.base_url),
        "apply",
        "-f",
        str(applied),
        "--dry-run",
        "--set",
        "alice",
    )
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("create    job") == 5 and "next: " in dry.stdout
    assert re.search(r"02:30 UTC\+0[12]:00", dry.stdout)  # Berlin's wall clock
    done = await cli(
        http, "--api", str(http.base_url), "apply", "-f", str(applied), "--set", "alice"
    )
    assert done.returncode == 0, done.stderr
    again = await cli(
        http,
        "--api",
        str(http.base_url),
        "apply",
        "-f",
        str(applied),
        "--dry-run",
        "--set",
        "alice",
    )
    assert "5 unchanged" in again.stdout
    # --dir writes the file; a file that cannot be read is one line and exit 1
    out_dir = tmp_path / "out"
    written = subprocess.run(
        shardsched_cmd("import", "crontab", str(crontab), "--dir", str(out_dir)),
        capture_output=True, text=True, env=child_env(), timeout=30,
    )  # fmt: skip
    assert written.returncode == 0 and (out_dir / "alice-cron.yaml").exists(), written.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "shardsched", "import", "crontab", str(tmp_path / "nope")],
        capture_output=True, text=True, env=child_env(), timeout=30,
    )  # fmt: skip
    assert missing.returncode == 1 and missing.stderr.startswith("shardsched: cannot read")


def test_the_importing_page_runs_as_printed(tmp_path) -> None:
    """docs/importing.md's crontab, imported: the jobs and the warnings it shows."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "importing.md").read_text()
    crontab = re.search(r"```crontab\n(.*?)```", page, re.DOTALL).group(1)
    said = re.search(r"```text stderr\n(.*?)```", page, re.DOTALL).group(1)
    (tmp_path / "backups.cron").write_text(crontab)
    out = subprocess.run(
        shardsched_cmd("import", "crontab", "backups.cron", "--zone", "Europe/Berlin"),
        capture_output=True, text=True, env=child_env(), timeout=30, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0 and out.stderr == said, out.stderr
    shown = re.search(r"```yaml imported\n(.*?)```", page, re.DOTALL).group(1)
    assert out.stdout == shown, out.stdout


def test_odd_lines_found_by_an_independent_tester() -> None:
    """A tab in a command, the same line twice, an env name cron would not take, bytes
    that are not UTF-8, a last line without its newline: each translated or said."""
    text = (
        '0 2 * * * awk -F"\t" x\n'
        "5 * * * * /bin/same\n"
        "5 * * * * /bin/same\n"
        "BAD-NAME=x\n"
        "# caf\ufffd\n"
        "7 * * * * echo caf\ufffd\n"
        "9 * * * * /bin/last"
    )
    out = read_crontab(text, "odd", "UTC")
    commands = [d["command"] for d in out.documents]
    assert commands == ['awk -F"\t" x', "/bin/same", "/bin/same", "/bin/last"]
    assert out.documents[0]["name"] == 'odd: awk -F" " x', "a tab shows as a space"
    ids = [d["id"] for d in out.documents]
    assert len(set(ids)) == 4 and ids[2] == ids[1] + "-2", "cron runs both: two jobs"
    said = "\n".join(out.warnings)
    assert "odd:4: 'BAD-NAME' is not a variable name" in said
    assert "odd:6: not translated: it holds bytes that are not UTF-8" in said
    assert "the last line ends without a newline" in said
    assert "odd:5" not in said, "a comment's bytes do not matter"


def test_the_command_line_says_a_bad_zone_a_bad_dir_and_reads_latin_1(tmp_path) -> None:
    crontab = tmp_path / "latin"
    crontab.write_bytes(b"# caf\xe9\n0 3 * * * /bin/nightly\n")
    (tmp_path / "a-file").write_text("")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            shardsched_cmd("import", "crontab", str(crontab), *args),
            capture_output=True, text=True, env=child_env(), timeout=60,
        )  # fmt: skip

    ok = run("--zone", "UTC")
    assert ok.returncode == 0 and "/bin/nightly" in ok.stdout and ok.stderr == "", ok.stderr
    for args, said in (
        (("--zone", "Nowhere/Zone"), "'Nowhere/Zone' is not a time zone"),
        (("--zone", "UTC", "--dir", str(tmp_path / "a-file")), "--dir"),
    ):
        out = run(*args)
        assert out.returncode != 0 and said in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and out.stderr.count("\n") == 1


def test_syntax_debians_cron_refuses_is_said() -> None:
    """Found by the second tester: ``L``, ``#``, ``?``, ``H`` and a wrapping range are
    shardsched's, not Debian cron's (its crontab refuses the file): each line is said,
    translated still; a plain line with names is not."""
    text = (
        "0 22-2/2 * * * /a\n0 0 L * * /b\nH 2 * * * /c\n0 0 * * 5#3 /d\n0 0 ? * * /e\n"
        "0 0 * JUL-AUG WED /f\n"
    )
    out = read_crontab(text, "ext", "UTC")
    said = "\n".join(out.warnings)
    for line, what in ((1, "wraps (22-2)"), (2, "uses L"), (3, "uses H"), (4, "uses #"),
                       (5, "uses ?")):  # fmt: skip
        assert f"ext:{line}: field" in said and what in said, (line, said)
    assert "ext:6" not in said
    assert "Debian's cron refuses it; translated as shardsched reads it" in said
    assert len(out.documents) == 6
