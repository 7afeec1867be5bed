"""The page of `neardup review` in a real browser: headless Chromium through Selenium.

Never skipped: without Chromium and its driver these tests fail, saying what to install
(CI installs them: `bash ops/stack.sh browser`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from detector.review_page import H, W

from ..helpers import HTML_SAMPLE, HTML_SAMPLE_TRUTH
from ..test_review import build, detect, hostile_page
from .chromium import chromium

SECTIONS = ("summary", "distributions-text", "knobs-text", "threshold-text")
SECTIONS += ("clusters", "sources", "truth")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    tmp = tmp_path_factory.mktemp("html")
    decisions = detect(tmp, HTML_SAMPLE)
    (tmp / "page.html").write_text(
        build(tmp, decisions, HTML_SAMPLE, "--truth", str(HTML_SAMPLE_TRUTH)), encoding="utf-8"
    )
    out["html"] = tmp / "page.html"
    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "page.html").write_text(hostile_page(tmp), encoding="utf-8")
    out["hostile"] = tmp / "page.html"
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def severe(driver: Any) -> list[dict[str, Any]]:
    """The console's errors since the last call (reading the log empties it)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def shown(element: WebElement) -> bool:
    return bool(element.is_displayed()) and element.size["width"] > 0 < element.size["height"]


def test_the_page_draws_its_sections_and_plots_with_no_script_error(
    browser: Any, pages: dict[str, Path]
) -> None:
    browser.get(pages["html"].as_uri())
    assert browser.title.startswith("neardup review")
    assert severe(browser) == []
    for name in SECTIONS:
        assert shown(browser.find_element(By.ID, name)), name
    plots = browser.find_elements(By.CSS_SELECTOR, "svg.plot")
    assert len(plots) == 3
    for svg in plots:
        assert shown(svg)
        size = svg.size["width"], svg.size["height"]
        assert size == (W + 2, H + 2)  # drawn at its size, in a border of a pixel
        assert svg.find_elements(By.CSS_SELECTOR, "rect")
    for svg in plots[:2]:  # the threshold's and k's line, drawn where the page put it
        (marker,) = svg.find_elements(By.CSS_SELECTOR, "line.marker")
        x1 = float(marker.get_attribute("x1"))
        assert marker.rect["height"] > 200  # a vertical line: no width for is_displayed
        assert marker.rect["x"] == pytest.approx(svg.rect["x"] + x1, abs=2)
    assert severe(browser) == []


def test_the_buttons_open_and_close_every_pair_of_their_section(
    browser: Any, pages: dict[str, Path]
) -> None:
    browser.get(pages["html"].as_uri())
    section = browser.find_element(By.ID, "threshold-text")
    pairs = section.find_elements(By.CSS_SELECTOR, "details.pair")
    assert pairs
    words = [p.find_element(By.CSS_SELECTOR, ".words") for p in pairs]
    assert not any(w.is_displayed() for w in words)
    section.find_element(By.CSS_SELECTOR, "button[data-open='1']").click()
    assert all(shown(w) for w in words)
    assert not any(
        d.get_attribute("open") for d in browser.find_elements(By.CSS_SELECTOR, "#truth details")
    )  # another section's pairs stay as they were
    section.find_element(By.CSS_SELECTOR, "button[data-open='0']").click()
    assert not any(w.is_displayed() for w in words)
    assert severe(browser) == []


def test_a_hostile_record_shows_as_text_and_runs_nothing(
    browser: Any, pages: dict[str, Path]
) -> None:
    browser.get(pages["hostile"].as_uri())
    for button in browser.find_elements(By.CSS_SELECTOR, "button[data-open='1']"):
        button.click()
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is what raises
    assert browser.execute_script("return window.__pwned === undefined") is True
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "<script>window.__pwned = 1</script>" in text
    assert "<script>alert('id')</script>" in text
    assert browser.execute_script("return document.scripts.length") == 1
    assert severe(browser) == []
