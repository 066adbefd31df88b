"""The built site served by nginx with the docs role's configuration: the release files come
back byte for byte with the right caching, a missing page is the site's 404, and headless
Chromium loads the home and release pages (screenshots in the test's temporary directory)."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from tests.docsite.conftest import Nginx, Site, fetch
from tests.support.browser import chrome, follow


@pytest.fixture
def served(renders: dict[str, Path], site: Site, nginx: Nginx) -> Iterator[tuple[Site, Nginx]]:
    site.endpoints["docs_url"] = nginx.url
    site.publish(renders["first"], now="2026-01-01T00:00:00Z")
    site.publish(renders["second"], now="2026-02-01T00:00:00Z")
    site.build()
    nginx.start(site.site)
    yield site, nginx


def test_release_files_are_served_as_listed(renders: dict[str, Path],
                                            served: tuple[Site, Nginx]) -> None:
    site, nginx = served
    index = json.loads((site.store / "index.json").read_text())
    current, old = index["releases"]
    with urllib.request.urlopen(nginx.url + "/releases/current/raw.json", timeout=10) as resp:
        raw = resp.read()
        assert resp.headers["Cache-Control"] == "no-cache"
        assert resp.headers["Content-Type"] == "application/json"
    assert hashlib.sha256(raw).hexdigest() == current["files"]["raw.json"]["sha256"]
    assert raw == (renders["second"] / "raw.json").read_bytes()
    pinned = fetch(f"{nginx.url}/releases/{old['genesis_hash']}/raw.json")
    assert pinned == (renders["first"] / "raw.json").read_bytes()
    node = fetch(nginx.url + "/releases/current/devnode")
    assert hashlib.sha256(node).hexdigest() == current["files"]["devnode"]["sha256"]
    with pytest.raises(urllib.error.HTTPError) as missing:
        fetch(nginx.url + "/releases/0x" + "00" * 32 + "/raw.json")
    assert missing.value.code == 404


def test_chromium_loads_the_home_and_release_pages(served: tuple[Site, Nginx],
                                                   tmp_path: Path) -> None:
    site, nginx = served
    index = json.loads((site.store / "index.json").read_text())
    current, old = index["releases"]
    browser = chrome("1280,1000")
    try:
        browser.get(nginx.url + "/")
        assert "NET" in browser.title
        home = browser.find_element(By.TAG_NAME, "article").text
        assert current["genesis_hash"] in home
        browser.save_screenshot(str(tmp_path / "home.png"))

        # Follow the home page's link, as a reader would.
        follow(browser, browser.find_element(By.CSS_SELECTOR, "article a[href$='releases/']"))
        assert browser.current_url == nginx.url + "/releases/"
        page = browser.find_element(By.TAG_NAME, "article").text
        assert current["genesis_hash"] in page
        assert current["files"]["raw.json"]["sha256"] in page
        assert f"Replaced on {old['replaced_at']} by {current['genesis_hash']}" in page
        browser.save_screenshot(str(tmp_path / "releases.png"))

        link = browser.find_element(By.CSS_SELECTOR, "article a[href='current/raw.json']")
        assert link.get_attribute("href") == nginx.url + "/releases/current/raw.json"
    finally:
        browser.quit()
    for shot in ("home.png", "releases.png"):
        data = (tmp_path / shot).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000
