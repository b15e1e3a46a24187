"""The operator's console in a real browser (headless chromium): log in with a token,
create a job through the form, see it fire and its run succeed without a reload, open
its output, pause it, render a DAG run's graph, and a read-only token sees no buttons
that change anything. Real node, real worker, real Redis; assertions on what the page
shows. With SHARDSCHED_SCREENSHOTS=<dir>, each screen is saved there (docs/img)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from browser import headless_chromium
from conftest import wait_until
from shardsched.core.access import Scope, TokenRequest
from shardsched.core.models import DagSpec, IntervalSchedule, TaskSpec
from shardsched.ops.access import tokens
from shardsched.ops.dags import manage
from shardsched.shard import maintenance
from shardsched.store.drive import drive_async
from shardsched.worker.worker import Worker

SHOTS = os.environ.get("SHARDSCHED_SCREENSHOTS")


def _shot(driver, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"console-{name}.png"))


def _login(driver, base: str, token: str) -> None:
    driver.get(base + "/ui/")
    WebDriverWait(driver, 20).until(ec.presence_of_element_located((By.ID, "token")))
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(driver, 20).until(ec.text_to_be_present_in_element((By.ID, "main"), "Overview"))


def _text(driver, css: str, text: str, timeout: float = 30) -> None:
    try:
        WebDriverWait(driver, timeout).until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)
        )
    except TimeoutException:
        body = driver.find_element(By.TAG_NAME, "body").text
        raise AssertionError(f"{text!r} not in {css} at {driver.current_url}:\n{body}") from None


def _fresh(driver, look):
    """What `look(driver)` returns, found afresh: the page redraws on every event, so an
    element found a moment ago may be gone (stale) by the time it is read or clicked."""
    return WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda drv: (look(drv),)
    )[0]


def _read(driver, by: str, sel: str) -> str:
    return _fresh(driver, lambda drv: drv.find_element(by, sel).text)


def _click(driver, by: str, sel: str) -> None:
    _fresh(driver, lambda drv: drv.find_element(by, sel).click())


def _type(driver, text: str) -> None:
    """Keys typed one by one into the focused field, as a person types (not a value set)."""
    chain = ActionChains(driver)
    for key in text:
        chain.send_keys(key).pause(0.05)
    chain.perform()


def _redraws(driver, n: int) -> None:
    """Until the screen has been redrawn by live events ``n`` times since it opened."""
    WebDriverWait(driver, 30).until(
        lambda drv: (
            drv.execute_script("return Number(document.getElementById('main').dataset.draws || 0)")
            >= n
        )
    )


def _walk(base: str, admin: str, viewer: str, dag_run_id: str, broken_id: str) -> dict[str, object]:
    seen: dict[str, object] = {}
    with headless_chromium() as d:
        # a wrong token is refused on the login page itself
        d.get(base + "/ui/")
        WebDriverWait(d, 20).until(ec.presence_of_element_located((By.ID, "token")))
        _shot(d, "login")
        d.find_element(By.ID, "token").send_keys("not-a-token")
        _click(d, By.CSS_SELECTOR, "button[type=submit]")
        _text(d, ".error", "Unknown or revoked token")
        _login(d, base, admin)
        _text(d, "#live", "live")
        _text(d, "#triage", "Needs attention", timeout=40)  # breaks-nightly dead-lettered
        _shot(d, "overview")
        seen["overview"] = _read(d, By.ID, "main")
        seen["alarms"] = _fresh(
            d,
            lambda drv: sorted(
                c.get_attribute("data-label")
                for c in drv.find_elements(By.CSS_SELECTOR, "#main .card.alarm")
            ),
        )
        _click(d, By.CSS_SELECTOR, "#shards summary")  # the folded shard table opens
        seen["shard_rows"] = _fresh(
            d, lambda drv: len(drv.find_elements(By.CSS_SELECTOR, "#shards tbody tr"))
        )
        seen["lag_chart"] = _fresh(
            d,
            lambda drv: [
                c.get_attribute("aria-label")
                for c in drv.find_elements(By.CSS_SELECTOR, "#main svg[role=img]")
            ],
        )

        # create a job through the form; it fires every 2 s
        d.get(base + "/ui/#/new-job")
        WebDriverWait(d, 20).until(ec.presence_of_element_located((By.ID, "n-name")))
        d.find_element(By.ID, "n-name").send_keys("hello-console")
        d.find_element(By.ID, "n-command").send_keys("echo hello from the console")
        _click(d, By.CSS_SELECTOR, "#n-kind option[value=interval]")
        d.find_element(By.ID, "n-expr").send_keys("2")
        _click(d, By.CSS_SELECTOR, "#main form button[type=submit]")
        _text(d, "h1", "hello-console")
        job_url = d.current_url
        seen["job_id"] = job_url.rsplit("/", 1)[1]
        d.execute_script("window.__same_page = true")
        # its run succeeds, shown without a reload (the event stream redraws the page)
        _text(d, "#main", "✓ succeeded", timeout=40)
        assert d.execute_script("return window.__same_page === true")
        _shot(d, "job")
        seen["job"] = _read(d, By.ID, "main")
        _click(d, By.XPATH, "//td/a[contains(@href, '#/runs/')]")
        _text(d, "#output", "hello from the console")
        _text(d, "#main", "History")
        _shot(d, "run")
        seen["run"] = _read(d, By.ID, "main")
        seen["run_events"] = _fresh(
            d,
            lambda drv: [
                e.text
                for e in drv.find_elements(
                    By.XPATH, "//h2[text()='History']/following-sibling::div[1]//tbody/tr/td[3]"
                )
            ],
        )
        missed = _read(d, By.XPATH, "//dt[text()='Deadline missed']/following-sibling::dd[1]")
        assert missed == "—"  # a run in time (a late one's row names the deadline)
        trace_link = "//dt[text()='Trace']/following-sibling::dd[1]/a"
        seen["trace"] = _fresh(
            d,
            lambda drv: (
                drv.find_element(By.XPATH, trace_link).get_attribute("href"),
                drv.find_element(By.XPATH, trace_link).text,
            ),
        )

        # type args and a pause reason key by key while the job fires every 2 s and each
        # event redraws the page: what is typed survives the redraws (focus and caret too)
        d.get(job_url)
        WebDriverWait(d, 20).until(ec.presence_of_element_located((By.ID, "p-reason")))
        draws = int(
            d.execute_script("return Number(document.getElementById('main').dataset.draws || 0)")
        )
        _click(d, By.ID, "t-args")
        _type(d, '{"day": 1}')
        _click(d, By.ID, "p-reason")
        _type(d, "maintenance")
        _redraws(d, draws + 2)  # at least two live redraws with the fields half typed
        _type(d, " window")
        _redraws(d, draws + 3)
        seen["typed"] = _fresh(
            d,
            lambda drv: (
                drv.find_element(By.ID, "t-args").get_attribute("value"),
                drv.find_element(By.ID, "p-reason").get_attribute("value"),
                drv.execute_script("return document.activeElement.id"),
            ),
        )
        _click(d, By.XPATH, "//button[text()='Pause']")
        _text(d, "#main", "Paused: maintenance window")
        seen["paused"] = _read(d, By.TAG_NAME, "h1")
        seen["upcoming_paused"] = _read(d, By.ID, "main")

        # the failing job's ticks are red, by how its run ended (twice failed)
        d.get(base + f"/ui/#/jobs/{broken_id}")
        WebDriverWait(d, 30).until(
            lambda drv: drv.find_elements(By.CSS_SELECTOR, ".strip [data-outcome=dead_letter]")
        )
        seen["broken_ticks"] = _fresh(
            d,
            lambda drv: [
                (t.get_attribute("data-outcome"), t.get_attribute("title"))
                for t in drv.find_elements(By.CSS_SELECTOR, ".strip [data-outcome]")
            ],
        )
        _shot(d, "job-failing")

        # the job's runs filtered by state
        d.get(job_url)
        _text(d, "h1", "hello-console")
        _click(d, By.CSS_SELECTOR, "#r-state option[value=succeeded]")
        WebDriverWait(d, 20).until(lambda drv: "state=succeeded" in drv.current_url)
        _text(d, "#main", "Took")
        seen["job_runs"] = _fresh(
            d,
            lambda drv: {
                t.text
                for t in drv.find_elements(
                    By.XPATH,
                    "//h2[text()='Runs']/following-sibling::div[1]//tbody//span[contains(@class,'state')]",
                )
            },
        )

        # the jobs list: its row, next fire, sparkline
        d.get(base + "/ui/#/jobs?q=hello")
        _text(d, "#main table", "hello-console")
        _shot(d, "jobs")
        seen["jobs"] = _read(d, By.ID, "main")

        # a DAG run's graph, drawn with each task's state
        d.get(base + f"/ui/#/dag-runs/{dag_run_id}")
        WebDriverWait(d, 30).until(
            lambda drv: len(drv.find_elements(By.CSS_SELECTOR, "g.task[data-state=succeeded]")) == 3
        )
        _shot(d, "dag-run")
        seen["dag"] = _fresh(
            d,
            lambda drv: {
                g.get_attribute("data-task"): g.get_attribute("data-state")
                for g in drv.find_elements(By.CSS_SELECTOR, "g.task")
            },
        )
        # the failure inbox names the job and shows what it printed, filters, and retries
        # a dead-lettered row; the dead letter retries a selection, after a dry run
        d.get(base + "/ui/#/failures")
        _text(d, "#main table", "breaks-nightly")
        _text(d, "#main table", "disk full")
        _click(d, By.CSS_SELECTOR, "#fl-state option[value=dead_letter]")
        _click(d, By.XPATH, "//form[@role='search']//button[text()='Filter']")
        WebDriverWait(d, 20).until(lambda drv: "state=dead_letter" in drv.current_url)
        _text(d, "#main table", "breaks-nightly")
        seen["failure_states"] = _fresh(
            d,
            lambda drv: {t.text for t in drv.find_elements(By.CSS_SELECTOR, "#main tbody .state")},
        )
        _click(d, By.XPATH, "//tbody//button[text()='Retry']")
        _text(d, "#toast", "Retried as")
        d.get(base + "/ui/#/dead-letter")
        WebDriverWait(d, 20).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, "#main input[type=checkbox]"))
        )
        _click(d, By.CSS_SELECTOR, "#main input[type=checkbox]")
        _click(d, By.XPATH, "//button[text()='Dry run']")
        _text(d, "#retry-report", "would retry")
        _click(d, By.XPATH, "//button[text()='Retry selected']")
        _text(d, "#retry-report", "retried as")
        seen["retried"] = _read(d, By.ID, "retry-report")
        # Runs now: every tab is a link that opens its list
        d.get(base + "/ui/#/runs")
        _text(d, "#main h1", "Runs under way")
        tabs = []
        for state in ("queued", "waiting", "retrying", "running"):
            _click(d, By.LINK_TEXT, state)
            _text(d, "#main p strong", state)
            tabs.append((d.current_url.split("#", 1)[1], _read(d, By.ID, "main")))
        seen["tabs"] = tabs
        for screen in ("dags", "fleet", "failures", "dead-letter", "runs"):
            d.get(base + f"/ui/#/{screen}")
            WebDriverWait(d, 20).until(
                ec.presence_of_element_located((By.CSS_SELECTOR, "#main h1"))
            )
            _shot(d, screen)
            seen[screen] = _read(d, By.CSS_SELECTOR, "#main h1")
        # a narrow screen (a phone): the page does not scroll sideways; wide tables scroll
        # in their own box
        d.set_window_size(390, 844)
        d.get(job_url)
        _text(d, "h1", "hello-console")
        _shot(d, "narrow")
        seen["narrow_overflow"] = d.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth"
        )
        d.set_window_size(1280, 900)
        _click(d, By.CSS_SELECTOR, "#logout button")
        WebDriverWait(d, 20).until(ec.presence_of_element_located((By.ID, "token")))

        # a read-only token sees no buttons that change anything
        _login(d, base, viewer)
        d.get(job_url)
        _text(d, "h1", "hello-console")
        seen["viewer_buttons"] = _fresh(
            d, lambda drv: [b.text for b in drv.find_elements(By.CSS_SELECTOR, "#main button")]
        )
    return seen


async def _lag_points(http, n: int) -> bool:
    return len((await http.get("/api/v1/status/lag")).json()["points"]) >= n


@pytest.mark.slow  # moved out of the default run to keep it under 8 min
async def test_the_console_end_to_end_in_a_browser(
    nursery, node, redis, dep, http, monkeypatch
) -> None:
    monkeypatch.setattr(maintenance, "LAG_SAMPLE_S", 0.3)  # the overview's chart has samples
    monkeypatch.setenv("SHARDSCHED_TRACE_URL", "http://127.0.0.1:16686/trace/{trace_id}")
    await nursery.start(Worker(redis, dep, worker_id="w-console", concurrency=4).run)
    admin = http.headers["authorization"].removeprefix("Bearer ")
    viewer = (
        await drive_async(
            tokens.create_token(dep, TokenRequest(name="viewer", scopes=[Scope.READ]), "t"), redis
        )
    ).token
    spec = DagSpec(
        name="etl",
        schedule=IntervalSchedule(every_s=86400),
        tasks=[
            TaskSpec(name="extract", command="true"),
            TaskSpec(name="transform", command="true", depends_on=["extract"]),
            TaskSpec(name="load", command="true", depends_on=["transform"]),
        ],
    )
    broken = {
        "name": "breaks-nightly", "command": "echo disk full; exit 1",
        "schedule": {"type": "once", "at": "2020-01-01T00:00:00Z"},
        "retry_policy": {"max_attempts": 2, "base_s": 0, "jitter": False},
    }  # fmt: skip
    made = await http.post("/api/v1/jobs", json=broken)
    assert made.status_code == 201
    broken_id = made.json()["job_id"]
    dag_id = (await drive_async(manage.create_dag(dep, spec), redis)).dag_id
    dag_run_id = (await drive_async(manage.trigger_dag(dep, dag_id), redis)).dag_run_id
    base = str(http.base_url).rstrip("/")
    await wait_until(lambda: _lag_points(http, 2))
    seen = await trio.to_thread.run_sync(_walk, base, admin, viewer, dag_run_id, broken_id)
    assert "Overview" in seen["overview"] and "free slots" in seen["overview"]
    assert "dead-lettered" in seen["alarms"] and "nodes" not in seen["alarms"]
    assert "Latest failures" in seen["overview"] and "breaks-nightly" in seen["overview"]
    assert seen["shard_rows"] == dep.n_shards
    assert seen["failure_states"] == {"☠ dead_letter"}
    assert seen["run_events"][-1] == "✓ succeeded" and "● running" in seen["run_events"]
    assert seen["job_runs"] == {"✓ succeeded"}
    assert any(label.startswith("trigger lag") for label in seen["lag_chart"]), seen["lag_chart"]
    assert "Next fires" in seen["job"] and "Ticks, last 24 hours" in seen["job"]
    assert "every 2s" in seen["job"] and "[object" not in seen["job"]
    assert seen["typed"] == ('{"day": 1}', "maintenance window", "p-reason")
    paused = (await http.get(f"/api/v1/jobs/{seen['job_id']}")).json()
    assert paused["status"] == "paused" and paused["pause_reason"] == "maintenance window"
    assert "Paused: none until it is resumed" in seen["upcoming_paused"]
    assert seen["broken_ticks"] and seen["broken_ticks"][0][0] == "dead_letter"
    assert "2 attempts" in seen["broken_ticks"][0][1]
    for (where, text), state in zip(
        seen["tabs"], ("queued", "waiting", "retrying", "running"), strict=True
    ):
        assert where == f"/runs?state={state}" and "[object" not in text and "http" not in text
    assert "hello from the console" in seen["run"] and "w-console" in seen["run"]
    href, trace_id = seen["trace"]  # the run page's Trace row links to the trace (#32)
    assert re.fullmatch(r"[0-9a-f]{32}", trace_id), trace_id
    assert href == f"http://127.0.0.1:16686/trace/{trace_id}"
    assert "paused" in seen["paused"]
    assert "hello-console" in seen["jobs"]
    assert seen["dag"] == {"extract": "succeeded", "transform": "succeeded", "load": "succeeded"}
    assert seen["fleet"] == "Fleet" and seen["dead-letter"] == "Dead letter"
    assert seen["viewer_buttons"] == []
    assert seen["narrow_overflow"] <= 0
    assert "retried as breaks" not in seen["retried"] and "retried as job_" in seen["retried"]


def _schedule_texts(base: str, admin: str, job_ids: list[str]) -> list[str]:
    with headless_chromium() as d:
        _login(d, base, admin)
        out = []
        for job_id in job_ids:
            d.get(base + f"/ui/#/jobs/{job_id}")
            _text(d, "#main", job_id)
            _text(d, "#main", "Next fires")
            _shot(d, f"schedule-{len(out)}")
            out.append(_read(d, By.ID, "main"))
        return out


@pytest.mark.slow  # a browser of its own
async def test_the_console_shows_window_and_multi_schedules(node, http) -> None:
    """The schedule kinds #33 added read as text on the job page, not as raw JSON."""
    window = {"type": "window", "cron": "0 2 * * *", "duration_s": 14400,
              "timezone": "Europe/Berlin"}  # fmt: skip
    multi = {
        "type": "multi",
        "schedules": [
            {"type": "cron", "expression": "0 9 * * 1-5"},
            {"type": "cron", "expression": "0 11 * * 6,0", "timezone": "Europe/Berlin"},
        ],
    }
    ids = []
    for name, schedule in (("win", window), ("multi", multi)):
        made = await http.post(
            "/api/v1/jobs", json={"name": name, "command": "true", "schedule": schedule}
        )
        assert made.status_code == 201, made.text
        ids.append(made.json()["job_id"])
    admin = http.headers["authorization"].removeprefix("Bearer ")
    base = str(http.base_url).rstrip("/")
    win_page, multi_page = await trio.to_thread.run_sync(_schedule_texts, base, admin, ids)
    assert "0 2 * * * + 4h (Europe/Berlin)" in win_page, win_page
    assert "any of: 0 9 * * 1-5; 0 11 * * 6,0 (Europe/Berlin)" in multi_page, multi_page
    assert '"type"' not in win_page + multi_page


def _repair_walk(base: str, admin: str, dag_id: str, drid: str, fresh_dag: str) -> dict:
    seen: dict[str, object] = {}
    with headless_chromium() as d:
        _login(d, base, admin)
        # a DAG that never ran: its graph and definition are there already
        d.get(base + f"/ui/#/dags/{fresh_dag}")
        _text(d, "#main", "Definition")
        seen["fresh_graph"] = _fresh(
            d,
            lambda drv: [
                g.get_attribute("data-task")
                for g in drv.find_elements(By.CSS_SELECTOR, "#dag-definition-graph g.task")
            ],
        )
        seen["fresh_text"] = _read(d, By.ID, "main")
        _click(d, By.XPATH, "//button[text()='Pause']")
        _text(d, "#main h1", "paused")
        # the failed DAG run: clear its failed task by a plan, with a note
        d.get(base + f"/ui/#/dag-runs/{drid}")
        _text(d, "#main h1", "failed")
        _click(d, By.ID, "repair-note")
        _type(d, "upstream fixed")
        _click(d, By.XPATH, "//tr[td[1][text()='flaky']]//button[text()='Clear']")
        _text(d, "#repair-plan", "Plan: clear")
        seen["plan"] = _read(d, By.ID, "repair-plan")
        _shot(d, "dag-repair")
        _click(d, By.XPATH, "//button[text()='Apply this plan']")
        _text(d, "#main h1", "succeeded", timeout=40)
        seen["after"] = _read(d, By.ID, "main")
        seen["bars"] = _fresh(
            d,
            lambda drv: [
                b.get_attribute("data-task")
                for b in drv.find_elements(By.CSS_SELECTOR, "#gantt .bar")
            ],
        )
        _shot(d, "dag-run-repaired")
        d.get(base + "/ui/#/dags")
        _text(d, "#main table", "succeeded")
        seen["list"] = _read(d, By.ID, "main")
    return seen


@pytest.mark.slow  # a browser of its own
async def test_the_console_repairs_a_dag_run_by_a_plan(
    nursery, node, redis, dep, http, tmp_path
) -> None:
    await nursery.start(Worker(redis, dep, worker_id="w-repair", concurrency=4).run)
    count = tmp_path / "n"
    flaky = f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}; [ $n -gt 1 ]"
    body = {
        "name": "nightly",
        "schedule": {"type": "once", "at": "2099-01-01T00:00:00Z"},
        "tasks": [
            {"name": "flaky", "command": flaky, "retry_policy": {"max_attempts": 1}},
            {"name": "publish", "command": "true", "depends_on": ["flaky"]},
        ],
    }
    dag_id = (await http.post("/api/v1/dags", json=body)).json()["dag_id"]
    fresh = (await http.post("/api/v1/dags", json={**body, "name": "never-ran"})).json()["dag_id"]
    drid = (await http.post(f"/api/v1/dags/{dag_id}/trigger")).json()["dag_run_id"]

    async def failed() -> bool:
        return (await http.get(f"/api/v1/dag-runs/{drid}")).json()["state"] == "failed"

    await wait_until(failed, timeout=30)
    admin = http.headers["authorization"].removeprefix("Bearer ")
    base = str(http.base_url).rstrip("/")
    seen = await trio.to_thread.run_sync(_repair_walk, base, admin, dag_id, drid, fresh)
    assert seen["fresh_graph"] == ["flaky", "publish"]
    assert "No DAG runs yet." in seen["fresh_text"] and "retry_policy" not in seen["fresh_text"]
    assert (await http.get(f"/api/v1/dags/{fresh}")).json()["status"] == "paused"
    assert "flaky failed rerun 2 0" in seen["plan"]
    assert "publish skipped rerun 2" in seen["plan"]  # as its run says, not the letter
    run = (await http.get(f"/api/v1/dag-runs/{drid}")).json()
    assert run["state"] == "succeeded"
    assert [t["run_id"].rsplit(":", 1)[1] for t in run["tasks"]] == ["2", "2"]
    assert seen["bars"].count("flaky") == 2 and "publish" in seen["bars"]
    changes = (await http.get(f"/api/v1/dags/{dag_id}/changes")).json()["changes"]
    assert any(c["action"] == "clear" and "upstream fixed" in c["detail"] for c in changes)
    assert "nightly" in seen["list"] and "never ran" in seen["list"]
