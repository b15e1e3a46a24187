"""Sentinel URLs as users and attackers write them (issue #53, the independent tester's
findings): every malformed one refused with a clear message that never shows a password,
in the parser and through the CLI (exit status, no traceback)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import child_env, shardsched_cmd
from shardsched.store.redis import check_url
from shardsched.store.redis.sentinel import SentinelURL

SECRET = "s3cr3t-pw"
WIDE = "".join(chr(0xFF10 + int(d)) for d in "26379")  #: full-width digits

BAD = [
    ("redis+sentinel://127.0.0.1:26379", "names its service"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:abc/svc", "HOST:PORT"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:99999/svc", "1 to 65535"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:0/svc", "1 to 65535"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:{WIDE}/svc", "HOST:PORT"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:26379/svc?bogus=1", "unknown Redis URL option"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:26379/svc?ssl_ca_certs=x", r"rediss\+sentinel"),
    (f"rediss+sentinel://:{SECRET}@127.0.0.1:26379/svc?bogus=1", "unknown Redis URL option"),
    (
        f"redis+sentinel://127.0.0.1:26379/svc?sentinel_password={SECRET}&sentinel_password=x",
        "given 2 times",
    ),
    ("redis+sentinel://127.0.0.1:26379/svc?sentinel_password=", "is empty"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:26379/svc%20name", "service name"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:26379/svc%00x", "service name"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:26379,%20127.0.0.1:1/svc", "HOST:PORT"),
    (f"redis+sentinel://:{SECRET}@ 127.0.0.1:26379/svc", "space"),
    ("redis+sentinel:///svc", "no sentinel"),
    (f"redis+sentinel://:{SECRET}@127.0.0.1:26379/svc/x", "the db"),
]


@pytest.mark.parametrize(("url", "says"), BAD)
def test_a_bad_url_is_refused_without_its_passwords(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        check_url(url)
    assert SECRET not in str(caught.value)


def test_good_urls_read_as_written() -> None:
    spec = SentinelURL.parse(
        "redis+sentinel://app:pw@h1:26380,[::1]:26381,h3/my.svc-1/2?sentinel_username=s"
        "&sentinel_password=sp"
    )
    assert [(s.host, s.port) for s in spec.sentinels] == [
        ("h1", 26380), ("::1", 26381), ("h3", 26379)
    ]  # fmt: skip
    assert spec.service == "my.svc-1" and spec.server.db == 2
    assert (spec.server.username, spec.server.password) == ("app", "pw")
    assert {(s.username, s.password) for s in spec.sentinels} == {("s", "sp")}


@pytest.mark.parametrize(
    "url",
    [
        "redis+sentinel://127.0.0.1:abc/svc",
        "redis+sentinel://[::1/svc",
        "redis://[::1/0",
        "redis+cluster://[::1",
        "redis+sentinel://127.0.0.1:26379/svc?bogus=1",
    ],
)
def test_the_cli_says_what_is_wrong_and_hides_the_password(url: str) -> None:
    done = subprocess.run(
        shardsched_cmd("status", "--redis", url),
        capture_output=True, text=True, timeout=60,
        env={**child_env(), "SHARDSCHED_REDIS_PASSWORD": SECRET},
    )  # fmt: skip
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and done.stderr.startswith("shardsched:"), done.stderr
    assert SECRET not in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["dev", "--replicas", "2"], "goes with --sentinel"),
        (
            ["node", "--redis", "redis://127.0.0.1:1/0", "--durable-timeout-ms", "500"],
            "goes with --durable-replicas",
        ),
        (["node", "--redis", "redis://127.0.0.1:1/0", "--durable-replicas", "99"], "0 to 16"),
    ],
)
def test_options_that_would_do_nothing_are_refused(args: list[str], says: str) -> None:
    done = subprocess.run(
        shardsched_cmd(*args), capture_output=True, text=True, timeout=60, env=child_env()
    )
    assert done.returncode != 0 and says in done.stderr, done.stderr
