"""The site built with MkDocs in strict mode from the project's docs, the operator guides and
the generated pages; its links are checked; the release page follows the store."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from ops_tools.docsite.build import Sources, build_site, default_sources
from ops_tools.docsite.linkcheck import check_site
from ops_tools.errors import InputError, OpsError
from tests.docsite.conftest import ROOT, VENV_BIN, Site


def text_of(html_file: Path) -> str:
    html = html_file.read_text()
    article = html[html.find("<article"): html.find("</article>")]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", article))


def manifest(render_dir: Path) -> dict:
    return json.loads((render_dir / "manifest.json").read_text())


def test_site_lists_the_current_release_and_serves_its_files(renders: dict[str, Path],
                                                             site: Site) -> None:
    site.publish(renders["first"])
    built = site.build()
    m = manifest(renders["first"])
    assert built.changed and built.current_genesis == m["genesis_hash"]
    served = site.site.resolve()
    for page in ("index.html", "network/identity/index.html", "network/endpoints/index.html",
                 "releases/index.html", "operators/full-node/index.html",
                 "reference/chainspec/index.html", "reference/docsite/index.html"):
        assert (served / page).is_file(), page
    release = text_of(served / "releases" / "index.html")
    assert m["genesis_hash"] in release and m["raw_spec_sha256"] in release
    assert "first published genesis" in release
    raw = (served / "releases" / "current" / "raw.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == m["raw_spec_sha256"]
    assert (served / "releases" / m["genesis_hash"] / "raw.json").read_bytes() == raw
    identity = text_of(served / "network" / "identity" / "index.html")
    assert m["network"]["id"] in identity
    assert f"Runtime spec version {m['runtime']['spec_version']}" in identity
    assert "ws://127.0.0.1:9944" in text_of(served / "network" / "endpoints" / "index.html")
    assert check_site(served) == []


def test_same_inputs_build_nothing_and_a_new_release_rebuilds(renders: dict[str, Path],
                                                              site: Site) -> None:
    site.publish(renders["first"])
    first = site.build()
    again = site.build()
    assert not again.changed and again.build_dir == first.build_dir
    site.publish(renders["second"])
    second = site.build()
    assert second.changed and second.build_dir != first.build_dir
    old = manifest(renders["first"])["genesis_hash"]
    new = manifest(renders["second"])["genesis_hash"]
    assert second.current_genesis == new
    page = site.site.resolve() / "releases" / "index.html"
    text = text_of(page)
    # The current release first, the old genesis below it, marked replaced by the new one.
    assert text.index(new) < text.index("Earlier releases") < text.index(old)
    assert re.search(rf"Replaced on \S+ by {new}", text), text
    current = (site.site.resolve() / "releases" / "current" / "raw.json").read_bytes()
    assert hashlib.sha256(current).hexdigest() == manifest(renders["second"])["raw_spec_sha256"]
    assert (site.site.resolve() / "releases" / old / "raw.json").is_file()


def test_a_broken_internal_link_fails_the_strict_build(renders: dict[str, Path], site: Site,
                                                       tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# A page\n\nSee [the missing page](missing.md).\n")
    sources = Sources(ROOT / "mkdocs.yml", docs, default_sources(ROOT).guides)
    site.publish(renders["first"])
    with pytest.raises(OpsError, match=r"mkdocs build --strict failed.*missing\.md"):
        build_site(sources, site.store, site.endpoints, site.site)
    assert not site.site.exists()  # nothing half-built is served


def test_the_link_check_finds_what_is_broken(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h1 id="top">A</h1><a href="../b/">b</a>')
    (tmp_path / "index.html").write_text(
        '<a href="a/">ok</a><a href="a/#top">ok</a><a href="https://example.org/x">external</a>'
        '<a href="a/#nope">bad anchor</a><a href="c.json">missing</a><img src="/../../etc/x">'
    )
    broken = {(b.page, b.link) for b in check_site(tmp_path)}
    assert broken == {("index.html", "a/#nope"), ("index.html", "c.json"),
                      ("index.html", "/../../etc/x"), ("a/index.html", "../b/")}


def test_cli_publish_and_build(renders: dict[str, Path], tmp_path: Path) -> None:
    ops = str(VENV_BIN / "ops-tools")
    store, out = tmp_path / "store", tmp_path / "site"
    pub = subprocess.run([ops, "docs", "publish", "--store", str(store), "--render-dir",
                          str(renders["first"]), "--node-binary", str(VENV_BIN / "devnode"),
                          "--node-kind", "devnode", "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert pub.returncode == 0, pub.stderr
    assert json.loads(pub.stdout)["current"] == manifest(renders["first"])["genesis_hash"]
    build = [ops, "docs", "build", "--store", str(store), "--site", str(out), "--json",
             "--endpoint", "docs_url=http://127.0.0.1:8080"]
    first = subprocess.run(build, capture_output=True, text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["changed"] is True
    second = subprocess.run(build, capture_output=True, text=True, timeout=300, check=False)
    assert json.loads(second.stdout)["changed"] is False
    page = (out / "releases" / "index.html").read_text()
    assert "http://127.0.0.1:8080/releases/current/raw.json" in page
    # publish --site: publish and build in one process (what roles/docs runs).
    both = subprocess.run([ops, "docs", "publish", "--store", str(store), "--render-dir",
                           str(renders["second"]), "--node-binary", str(VENV_BIN / "devnode"),
                           "--node-kind", "devnode", "--site", str(out), "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert both.returncode == 0, both.stderr
    result = json.loads(both.stdout)
    assert result["published"] and result["built"] and result["changed"]
    assert result["current_genesis"] == manifest(renders["second"])["genesis_hash"]
    assert result["replaced"] == manifest(renders["first"])["genesis_hash"]
    bad = subprocess.run([*build, "--endpoint", "no-equals-sign"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "error: --endpoint 'no-equals-sign': expected NAME=URL, e.g. rpc_url=wss://rpc.example"]


def test_a_missing_page_fails_the_build(renders: dict[str, Path], site: Site,
                                        tmp_path: Path) -> None:
    sources = Sources(ROOT / "mkdocs.yml", ROOT / "docs",
                      {"operators/full-node.md": tmp_path / "gone.md"})
    site.publish(renders["first"])
    with pytest.raises(InputError, match=r"gone\.md: no such file"):
        build_site(sources, site.store, site.endpoints, site.site)
