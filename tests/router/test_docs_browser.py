"""``/docs`` in a real browser: Swagger UI renders the OpenAPI 3.1 document and lists the
API's operations (Swagger UI 4 showed "Unable to render this definition" for it, which a
status-code check never saw)."""

from __future__ import annotations

import pytest
import trio
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from browser import headless_chromium


def _operations(base: str) -> tuple[list[tuple[str, str]], str]:
    with headless_chromium() as driver:
        driver.get(base + "/docs")
        WebDriverWait(driver, 30).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, ".opblock-summary-path"))
        )
        ops = [
            (
                el.find_element(By.CSS_SELECTOR, ".opblock-summary-method").text.lower(),
                el.find_element(By.CSS_SELECTOR, ".opblock-summary-path").get_attribute(
                    "data-path"
                ),
            )
            for el in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary")
        ]
        return ops, driver.find_element(By.TAG_NAME, "body").text


@pytest.mark.slow  # moved out of the default run to keep it under 8 min
async def test_docs_render_the_openapi_31_document_with_every_operation(http) -> None:
    spec = (await http.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.1")
    wanted = {(m, p) for p, item in spec["paths"].items() for m in item if m != "parameters"}
    shown, text = await trio.to_thread.run_sync(_operations, str(http.base_url).rstrip("/"))
    assert "Unable to render" not in text
    assert set(shown) == wanted, set(shown) ^ wanted
    assert ("post", "/api/v1/runs/{run_id}/cancel") in shown
