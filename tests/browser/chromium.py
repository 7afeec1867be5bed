"""Headless Chromium through Selenium, for the tests that open a page in a real browser
and for bench/review_screenshot.py. Debian's chromium and chromium-driver (CI installs them:
ops/stack.sh browser); the driver is named, so Selenium Manager never looks for one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("NEARDUP_STACK_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("NEARDUP_STACK_CHROMEDRIVER", "/usr/bin/chromedriver")
# Without the background-networking flags Chromium reaches out at start (updates, sync,
# field trials), and on a closed network those connections are refused loudly.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@contextmanager
def chromium(width: int = 1280, height: int = 900) -> Iterator[webdriver.Chrome]:
    """A headless Chromium of its own profile, whose console the caller can read
    (driver.get_log("browser")); quit and its profile removed on exit."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).is_file():
            raise FileNotFoundError(
                f"{path} not found: install Debian's chromium and chromium-driver "
                "(bash ops/stack.sh browser)"
            )
    with tempfile.TemporaryDirectory(prefix="neardup-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        options.add_argument(f"--window-size={width},{height}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            yield driver
        finally:
            driver.quit()
