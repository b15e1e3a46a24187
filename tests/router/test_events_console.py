"""The console's Events screens in a real browser (headless chromium): the nav link, the
list of events received with each one's outcome, its filters typed and chosen and
submitted, an event's page with its deliveries, the run it made (whose page says its
cause and links back), a refused and a deduplicated one said as such."""

from __future__ import annotations

import pytest
import trio
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from test_console_browser import _click, _fresh, _login, _read, _shot, _text, _type

from browser import headless_chromium

pytestmark = pytest.mark.slow  # a browser of its own


def _walk(base: str, admin: str, first: str, refused: str) -> dict:
    seen: dict[str, str] = {}
    with headless_chromium() as d:
        _login(d, base, admin)
        _click(d, By.LINK_TEXT, "Events")
        _text(d, "#main h1", "Events")
        _text(d, "#main table", first)
        seen["list"] = _read(d, By.ID, "main")
        _shot(d, "events")
        # filter: an outcome chosen, then a name typed, submitted with the button
        _fresh(
            d, lambda drv: Select(drv.find_element(By.ID, "ev-outcome")).select_by_value("refused")
        )
        _click(d, By.XPATH, "//button[text()='Filter']")
        _text(d, "#main table", refused)
        seen["refused_only"] = _read(d, By.CSS_SELECTOR, "#main table")
        _click(d, By.ID, "ev-name")
        _type(d, "cms.published")
        _fresh(d, lambda drv: Select(drv.find_element(By.ID, "ev-outcome")).select_by_value(""))
        _click(d, By.XPATH, "//button[text()='Filter']")
        _text(d, "#main table", first)
        seen["by_name"] = _read(d, By.CSS_SELECTOR, "#main table")
        # an event's page, then the run it made, then back by its cause
        _click(d, By.LINK_TEXT, first)
        _text(d, "#main h1", first)
        seen["event"] = _read(d, By.ID, "main")
        _shot(d, "event")
        _click(d, By.CSS_SELECTOR, "#main table a[href^='#/runs/']")
        _text(d, "#main", "Cause")
        seen["run"] = _read(d, By.ID, "main")
        _click(d, By.CSS_SELECTOR, "#main dd a[href^='#/events/']")
        _text(d, "#main h1", first)
    return seen


async def test_the_events_screens(node, worker, http) -> None:
    job = {"name": "reindex", "command": "true", "on": [{"event": "cms.published"}]}
    job_id = (await http.post("/api/v1/jobs", json=job)).json()["job_id"]
    body = {"payload": {"slug": "a"}, "idempotency_key": "k"}
    first = (await http.post("/api/v1/events/cms.published", json=body)).json()
    again = (await http.post("/api/v1/events/cms.published", json={"idempotency_key": "k"})).json()
    refused = (await http.post("/api/v1/events/nobody.listens", json={})).json()
    assert again["outcome"]["outcome"] == "deduplicated"
    admin = http.headers["authorization"].removeprefix("Bearer ")
    base = str(http.base_url).rstrip("/")
    seen = await trio.to_thread.run_sync(_walk, base, admin, first["event_id"], refused["event_id"])
    assert "runs" in seen["list"] and "deduplicated" in seen["list"] and "refused" in seen["list"]
    assert refused["event_id"] in seen["refused_only"]
    assert first["event_id"] not in seen["refused_only"]
    assert refused["event_id"] not in seen["by_name"] and again["event_id"] in seen["by_name"]
    assert job_id in seen["event"] and "created" in seen["event"] and '"slug": "a"' in seen["event"]
    assert f"event {first['event_id']}" in seen["run"]
