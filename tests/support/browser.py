"""Headless Chromium for the tests of web pages (Debian's chromium and chromium-driver, which
scripts/bootstrap installs), and the wait that a click which navigates needs."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# What chromedriver answers, now and then, for an element of a page that a navigation is
# tearing down, instead of "stale element reference" (SeleniumHQ/selenium#15401).
NODE_GONE = "Node with given id does not belong to the document"


def chrome(window: str, *, javascript: bool = True) -> webdriver.Chrome:
    """A headless Chromium of ``window`` ("1400,2400") pixels; the caller quits it."""
    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
        pytest.fail("chromium and chromium-driver are not installed; run scripts/bootstrap")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={window}", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(60)
    return driver


def replaced(page: WebElement) -> Callable[[webdriver.Chrome], bool]:
    """A wait condition: ``page`` (a page's ``html`` element) belongs to a page that is gone."""

    def gone(_driver: webdriver.Chrome) -> bool:
        try:
            page.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if NODE_GONE in (exc.msg or ""):
                return True
            raise
        return False

    return gone


def follow(driver: webdriver.Chrome, element: WebElement, expect_id: str | None = None) -> None:
    """Click ``element`` and wait for the next page (and its element ``expect_id``): a click
    returns before the navigation it starts has replaced the page, and elements found
    meanwhile belong to the old one."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 60).until(replaced(page))
    if expect_id is not None:
        WebDriverWait(driver, 60).until(ec.presence_of_element_located((By.ID, expect_id)))
