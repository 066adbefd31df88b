"""Internal link check of a built site: every href/src that stays on the site must name a file
that exists, and a #fragment into a page must name an id on that page."""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

EXTERNAL_SCHEMES = ("http", "https", "mailto", "data", "javascript", "ws", "wss", "tel")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)
            # <link rel=canonical> and friends name the public URL, not a file here.
            elif (name == "href" and tag in ("a", "link")) or (
                name == "src" and tag in ("img", "script")
            ):
                self.links.append(value)


@dataclass(frozen=True)
class BrokenLink:
    page: str
    link: str
    reason: str

    def __str__(self) -> str:
        return f"{self.page}: {self.link} ({self.reason})"


def _parse(path: Path) -> _Collector:
    collector = _Collector()
    collector.feed(path.read_text(errors="replace"))
    return collector


def _target(site: Path, page: Path, path: str) -> Path:
    base = site if path.startswith("/") else page.parent
    target = (base / unquote(path.lstrip("/"))).resolve()
    if path.endswith("/") or target.is_dir():
        target = target / "index.html"
    return target


def check_site(site: Path) -> list[BrokenLink]:
    site = site.resolve()
    pages = sorted(site.rglob("*.html"))
    parsed = {p: _parse(p) for p in pages}
    broken: list[BrokenLink] = []
    for page, collector in parsed.items():
        name = str(page.relative_to(site))
        for link in collector.links:
            parts = urlsplit(link)
            if parts.scheme in EXTERNAL_SCHEMES or parts.netloc:
                continue
            if not parts.path:  # "#fragment" on this page
                if parts.fragment and parts.fragment not in collector.ids:
                    broken.append(BrokenLink(name, link, "no such anchor on this page"))
                continue
            target = _target(site, page, parts.path)
            if not target.is_relative_to(site):
                broken.append(BrokenLink(name, link, "points outside the site"))
            elif not target.is_file():
                broken.append(BrokenLink(name, link, "no such file"))
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if parts.fragment not in ids:
                    broken.append(BrokenLink(name, link, f"no anchor #{parts.fragment} there"))
    return broken
