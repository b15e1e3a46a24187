"""Every bench command at a tiny size, so none of them rots. Not a measurement."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import child_env, shardsched_cmd

pytestmark = pytest.mark.processes


def bench(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        shardsched_cmd("bench", *args),
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=timeout,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.mark.slow  # 6-12 s: the default suite stays near 8 minutes
def test_burst(tmp_path: Path) -> None:
    data, png = tmp_path / "burst.json", tmp_path / "burst.png"
    bench(
        "burst",
        "--jobs",
        "300",
        "--mode",
        "once",
        "--lead",
        "5",  # a node and two workers start within it on a loaded 2-core box
        "--shards",
        "8",
        "--concurrency",
        "100",
        "--json",
        str(data),
        "--plot",
        str(png),
    )
    result = json.loads(data.read_text())
    assert result["jobs"] == result["runs_read"] == result["succeeded"] == 300
    assert result["audit"]["missing"] == result["audit"]["duplicated"] == 0
    for key in ("trigger_lag_s", "start_lag_s", "end_to_end_s"):
        assert set(result[key]) == {"p50", "p90", "p99", "max"}
    for key in (
        "all_triggered_s",
        "all_started_s",
        "all_completed_s",
        "redis_floor_s",
        "redis_floor_fires_per_s",
        "trigger_overhead_ratio",
        "started_over_stream_floor",
    ):
        assert result[key] > 0, key
    # the stream floor on the same Redis, CPU per run by process kind and by script
    assert result["stream_floor"]["all_started_s"] > 0
    assert result["cpu_us_per_run"]["total"] == pytest.approx(
        sum(result["cpu_us_per_run"][k] for k in ("node", "workers", "redis")), abs=0.5
    )
    assert result["cpu_us_per_run"]["workers"] > 0 and result["cpu_us_per_run"]["redis"] > 0
    for script in ("fire", "claim", "complete"):
        assert result["scripts"][script]["redis_cpu_us_per_run"] > 0, script
    assert png.stat().st_size > 10_000


@pytest.mark.slow  # ~15 s: two replicas' first sync, then the burst
def test_burst_in_the_durable_mode(tmp_path: Path) -> None:
    """The durable mode's burst beside the same one without it (#53): the bench's own
    Redis with two replicas, every write waiting for both."""
    data = tmp_path / "burst.json"
    bench(
        "burst", "--jobs", "200", "--mode", "once", "--lead", "5", "--shards", "8",
        "--replicas", "2", "--durable", "2", "--fsync", "off", "--no-floor",
        "--json", str(data),
    )  # fmt: skip
    result = json.loads(data.read_text())
    assert (result["replicas"], result["durable"]) == (2, 2)
    assert result["succeeded"] == 200 and result["audit"]["duplicated"] == 0
    refused = subprocess.run(
        shardsched_cmd("bench", "burst", "--jobs", "10", "--durable", "2"),
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0 and "--replicas N" in refused.stderr


def test_burst_subprocess_command() -> None:
    out = bench(
        "burst",
        "--jobs",
        "40",
        "--mode",
        "once",
        "--lead",
        "5",  # the box may be busy: set-up must end before the boundary
        "--shards",
        "4",
        "--command",
        "true",
        "--no-floor",
        "--concurrency",
        "20",
        "--keys",
        "3",  # the runs on three concurrency keys: the keyed path, and its streams awaited
    )
    assert "'missing': 0" in out.stdout and "and 3 concurrency keys" in out.stdout


@pytest.mark.slow  # 6-12 s: the default suite stays near 8 minutes
def test_steady(tmp_path: Path) -> None:
    data = tmp_path / "steady.json"
    bench("steady", "--rate", "50", "--duration", "2", "--lead", "2", "--json", str(data))
    result = json.loads(data.read_text())
    assert result["fired"] >= 100 and result["audit"] == {"missing": 0, "duplicated": 0}


@pytest.mark.slow  # 15 s: the default suite stays under 8 minutes
def test_soak(tmp_path: Path) -> None:
    data, png = tmp_path / "soak.json", tmp_path / "soak.png"
    args = ("--rate", "50", "--duration", "8", "--retention-s", "2", "--retention-every", "1")
    more = ("--sample-every", "1", "--backlog", "2000", "--lead", "1")
    bench("soak", *args, *more, "--json", str(data), "--plot", str(png))
    result = json.loads(data.read_text())
    assert result["audit"]["missing"] == 0 and result["audit"]["dup"] == 0
    assert result["samples"][-1]["archived_rows"] >= 2000 and png.stat().st_size > 0
    assert result["samples"][-1]["backlog_left"] == 0 and result["backlog_cleaned_after_s"] >= 0


@pytest.mark.slow
def test_soak_memory_plateaus_while_the_archive_grows(tmp_path: Path) -> None:
    """The soak as CI runs it: two minutes at a quarter of the seed's rate with a 20 s
    retention. Redis memory levels off; the archive takes the runs at the rate they fire."""
    data = tmp_path / "soak.json"
    args = ("--rate", "200", "--duration", "120", "--retention-s", "20")
    # a sample every 2 s: the slope is fitted through the retention passes' saw-tooth
    # (at every 5 s, CI once fitted 7.8 KB/s to a flat ~6 MB: 10 samples, 0.5 MB teeth)
    bench("soak", *args, "--retention-every", "5", "--sample-every", "2", "--json", str(data),
          timeout=400)  # fmt: skip
    result = json.loads(data.read_text())
    growth = {k: v for k, v in result.items() if k.startswith("used_memory_growth")}
    assert result["plateau"], growth
    assert result["archive_rows_per_s_after_first_window"] > 150
    assert result["audit"]["missing"] == 0 and result["audit"]["dup"] == 0


@pytest.mark.slow  # 6-12 s: the default suite stays near 8 minutes
def test_register_and_footprint(tmp_path: Path) -> None:
    out = bench("register", "--jobs", "2000", "--repeat", "1")
    assert "jobs/s" in out.stdout
    data = tmp_path / "fp.json"
    bench("footprint", "--jobs", "2000", "--runs", "200", "--json", str(data))
    result = json.loads(data.read_text())
    assert 100 < result["bytes_per_job"] < 5000 and result["bytes_per_completed_run"] > 0


@pytest.mark.slow
def test_scale() -> None:
    out = bench("scale", "--jobs", "200", "--nodes", "1,2", "--workers", "1", "--lead", "3")
    assert out.stdout.count("| 1 | 1 |") == 1 and out.stdout.count("| 2 | 1 |") == 1


def test_plan(tmp_path: Path) -> None:
    data = tmp_path / "plan.json"
    bench("plan", "--json", str(data))
    result = json.loads(data.read_text())
    assert result["workers"] > 0 and result["nodes"] >= 3 and result["redis_masters"] >= 1
    bench("plan", "--hot-days", "2", "--cold-days", "30", "--json", str(data))
    hot_cold = json.loads(data.read_text())
    assert hot_cold["redis_memory_gib"] < result["redis_memory_gib"] / 10  # 2 days, not 30
    assert hot_cold["archive_gib_kept"] == round(hot_cold["archive_gib_per_day"] * 30, 1) > 0


def test_archive(tmp_path: Path) -> None:
    data = tmp_path / "archive.json"
    bench("archive", "--runs", "2000", "--jobs", "20", "--json", str(data))
    result = json.loads(data.read_text())
    assert result["bytes_per_run"] > 0 and result["read_one_job_runs"] > 0


@pytest.mark.slow  # out of the default run, which stays near 8 min
def test_auth(tmp_path: Path) -> None:
    data = tmp_path / "auth.json"
    bench("auth", "--requests", "20", "--rounds", "1", "--json", str(data))
    result = json.loads(data.read_text())
    assert result["requests_per_mode"] == 20 and result["ms"]["auth"]["p50"] > 0


@pytest.mark.slow  # out of the default run, which stays near 8 min
@pytest.mark.serial  # a takeover's latency
def test_takeover(tmp_path: Path) -> None:
    data = tmp_path / "takeover.json"
    bench(
        "takeover",
        "--rounds",
        "1",
        "--jobs",
        "64",
        "--lease-ttl",
        "1",
        "--renew-every",
        "0.3",
        "--json",
        str(data),
    )
    result = json.loads(data.read_text())
    assert 0 < result["median_s"] < 5


@pytest.mark.slow
def test_dag(tmp_path: Path) -> None:
    data = tmp_path / "dag.json"
    bench("dag", "--dags", "40", "--shards", "8", "--fsync", "off", "--json", str(data))
    result = json.loads(data.read_text())
    assert result["task_runs"] == result["succeeded"] == 400
    assert result["released_twice"] == result["never_released"] == 0
    assert result["audit"] == {"missing": 0, "duplicated": 0}
    assert result["releases_per_s"] > 0 and result["release_latency_s"]["max"] == 0
    assert result["cpu_us_per_task_run"]["total"] > 0


@pytest.mark.slow
@pytest.mark.serial  # holds a rate of firings a second
def test_fleet(tmp_path: Path) -> None:
    data = tmp_path / "fleet.json"
    bench(
        "fleet", "--fleets", "4,20", "--processes", "2", "--rate", "50", "--duration", "3",
        "--idle", "2", "--settle", "1", "--shards", "8", "--json", str(data),
    )  # fmt: skip
    result = json.loads(data.read_text())
    assert [f["workers"] for f in result["fleets"]] == [4, 20]
    for fleet in result["fleets"]:
        assert fleet["firings_per_s"] > 0 and fleet["redis_cpu_idle_s_per_s"] > 0
        assert fleet["claim_latency_s"]["p99"] is not None
        assert fleet["runs_per_worker"]["max"] >= fleet["runs_per_worker"]["mean"] > 0
        assert set(fleet["process_cpu_us_per_firing"]) == {"node", "worker_hosts"}
    # the bare queue beside it: every due entry read at the rate, the burst on the same Redis
    steady, burst = result["stream_floor"]["steady"], result["stream_floor"]["burst"]
    assert 40 <= steady["firings_per_s"] <= 60
    assert steady["producer_cpu_us_per_firing"] > 0 and steady["consumer_cpu_us_per_firing"] > 0
    assert burst["all_started_s"] > 0 and burst["redis_cpu_us_per_run"] > 0


@pytest.mark.slow  # 6-12 s: the default suite stays near 8 minutes
def test_instructions(tmp_path: Path) -> None:
    """Redis's instructions per run under callgrind: each script's, their sum, the floor's."""
    data = tmp_path / "instructions.json"
    earlier = tmp_path / "earlier.json"
    counts = {"fire": 9000, "claim": 9000, "complete": 9000, "ledger": 27000, "floor": 3000}
    earlier.write_text(json.dumps({"instructions_per_run": counts}))
    png = tmp_path / "instructions.png"
    out = bench(
        "instructions", "--runs", "600", "--shards", "4", "--json", str(data),
        "--plot", str(png), "--compare", f"earlier={earlier}",
    )  # fmt: skip
    assert png.stat().st_size > 10_000
    result = json.loads(data.read_text())
    per = result["instructions_per_run"]
    assert all(per[k] > 1000 for k in ("fire", "claim", "complete", "floor")), per
    assert per["ledger"] == per["fire"] + per["claim"] + per["complete"]
    assert result["ledger_over_floor"] == round(per["ledger"] / per["floor"], 2) > 1
    assert f"{per['ledger']:,}" in out.stdout
    # the bare ledgers (bench/bounds.py) do less than the real one, the 'entry' one least
    bare = result["bare_ledgers"]
    assert set(bare) == {"records", "entry"}
    for name, counts in bare.items():
        assert counts["ledger"] == counts["fire"] + counts["claim"] + counts["complete"]
        assert counts["over_floor"] == round(counts["ledger"] / per["floor"], 2)
        assert f"bare ledger '{name}'" in out.stdout
    assert per["floor"] < bare["entry"]["ledger"] < bare["records"]["ledger"] < per["ledger"]
