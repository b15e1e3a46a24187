"""A real headless browser for the tests: Debian's chromium driven through its
chromium-driver by selenium (scripts/setup.sh --tests installs both). No browser is
downloaded, and nothing but loopback is reached."""

from __future__ import annotations

import gc
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


@contextmanager
def headless_chromium(width: int = 1280, height: int = 900) -> Iterator[webdriver.Chrome]:
    options = Options()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",  # the test runs as root in CI
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",  # no traffic but the page's own, to loopback
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()
        driver.command_executor.close()  # its pooled sockets to chromedriver
        # anything of selenium's left for the garbage collector goes now, not as a
        # ResourceWarning in whichever later test the collector happens to run in
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
