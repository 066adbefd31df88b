"""The explorer in a real browser: Debian's headless Chromium driven by selenium through
chromium-driver, with JavaScript switched off (the site must not need it). Each page's
screenshot is written under the test's temporary directory for a person to look at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.services.explorer.conftest import Stack
from tests.support.browser import chrome, follow


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chrome("1400,2400", javascript=False)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> Path:
    path = tmp_path / "screenshots" / f"{name}.png"
    path.parent.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(path)), name
    assert path.stat().st_size > 1000
    print(f"screenshot: {path}")
    return path


def test_list_search_report_checks_anchor_in_a_browser(stack: Stack, browser, tmp_path):
    browser.get(stack.explorer.url + "/")
    assert "Attestation reports" in browser.find_element(By.TAG_NAME, "h1").text
    assert stack.report_hash in browser.find_element(By.ID, "reports").text
    shot(browser, tmp_path, "01-list")

    box = browser.find_element(By.ID, "search")
    box.clear()
    box.send_keys(stack.address)
    # A plain GET form: no script.
    follow(browser, browser.find_element(By.ID, "search-button"), "reports")
    rows = browser.find_elements(By.CSS_SELECTOR, "#reports tbody tr")
    assert rows and all(stack.address in r.text for r in rows)
    shot(browser, tmp_path, "02-search")

    follow(browser, browser.find_element(By.LINK_TEXT, stack.report_hash), "report-hash")
    assert browser.find_element(By.ID, "report-hash").text == stack.report_hash
    assert browser.find_element(By.ID, "mock-badge").text == "MOCK"
    assert browser.find_element(By.ID, "verdict").text.startswith("VALID")
    checks = {row.find_elements(By.TAG_NAME, "td")[0].text:
              row.find_elements(By.TAG_NAME, "td")[1].text
              for row in browser.find_elements(By.CSS_SELECTOR, "#checks tbody tr")}
    assert {"hash", "tdx.quote_signature", "binding.report_data", "gpu[0].nonce",
            "mock_root_accepted"} <= set(checks)
    assert set(checks.values()) == {"ok"}
    anchor = browser.find_element(By.ID, "anchor").text
    assert stack.address in anchor and f"{stack.stake} plancks" in anchor
    shot(browser, tmp_path, "03-report")

    follow(browser, browser.find_element(By.ID, "operator-link"), "operator-id")
    assert browser.find_element(By.ID, "operator-id").text == stack.operator
    assert stack.address in browser.find_element(By.ID, "registrations").text
    shot(browser, tmp_path, "04-operator")


def test_not_found_and_bad_input_pages_in_a_browser(stack: Stack, browser, tmp_path):
    browser.get(f"{stack.explorer.url}/reports/0x{'ef' * 32}")
    assert "No such report" in browser.find_element(By.ID, "error-title").text
    shot(browser, tmp_path, "05-not-found")
    browser.get(f"{stack.explorer.url}/?q=0xabc")
    assert "Not a report hash" in browser.find_element(By.ID, "error-title").text
    shot(browser, tmp_path, "06-bad-input")
