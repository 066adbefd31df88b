"""Fixtures of the docs-site suite: real renders of the local network definition, release
stores and built sites in temporary directories, and nginx (with the docs role's own
configuration template) serving a built site on a free loopback port."""

from __future__ import annotations

import dataclasses
import getpass
import html
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jinja2
import pytest

from ops_tools.chainspec.runtime import build_runtime_blob
from ops_tools.devnode.runtime.blob import VERSION
from ops_tools.docsite.build import Built, build_site, default_sources
from ops_tools.docsite.bundle import CachedBundle, cached_bundle
from ops_tools.docsite.publish import Release, SiteResult, publish_site
from ops_tools.docsite.store import publish_release
from tests.conftest import ROOT, free_port

VENV_BIN = ROOT / ".venv" / "bin"
DEVNODE = VENV_BIN / "devnode"
LOCAL_NETWORK = ROOT / "chainspec" / "networks" / "local.yml"
ROLE_TEMPLATES = ROOT / "roles" / "docs" / "templates"


def render(out: Path, runtime: Path | None = None) -> Path:
    cmd = [str(VENV_BIN / "ops-tools"), "chainspec", "render", "--network", str(LOCAL_NETWORK),
           "--node", str(DEVNODE), "--out", str(out)]
    if runtime is not None:
        cmd += ["--runtime", str(runtime)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=120)
    return out


@pytest.fixture(scope="session")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two render directories of local.yml: 'first' with the node's runtime, 'second' with
    another runtime version (what a new pallet-suite revision gives: another genesis)."""
    base = tmp_path_factory.mktemp("renders")
    blob = base / "runtime-next.wasm"
    blob.write_bytes(
        build_runtime_blob(
            dataclasses.replace(VERSION, spec_version=VERSION.spec_version + 1),
            extra_sections={"test": b"docs-site"},
        )
    )
    return {"first": render(base / "first"), "second": render(base / "second", blob)}


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> CachedBundle:
    """The development-node bundle of this checkout, built once per session into a cache of
    the session's own (a build takes seconds)."""
    return cached_bundle(tmp_path_factory.mktemp("bundles"))


@dataclass
class Site:
    store: Path
    site: Path
    endpoints: dict[str, str]

    def publish(self, render_dir: Path, now: str | None = None) -> None:
        """The store alone, with the development node's launcher as the release's node file
        (what the page and index tests need; the served bundle has tests of its own)."""
        publish_release(self.store, render_dir, DEVNODE, "devnode", now=now)

    def build(self) -> Built:
        return build_site(default_sources(ROOT), self.store, self.endpoints, self.site)

    def publish_site(self, release: Release, bundle_cache: Path | None = None,
                     check: bool = False) -> SiteResult:
        """What the docs role does: publish (the bundle for devnode), build, record."""
        return publish_site(self.store, self.site, self.endpoints, release,
                            project_root=ROOT, bundle_cache=bundle_cache, check=check)


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path / "store", tmp_path / "site", {"rpc_url": "ws://127.0.0.1:9944"})


@dataclass
class Nginx:
    root: Path
    port: int
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, site_dir: Path) -> None:
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(nginx).exists():
            pytest.skip("nginx is not installed (scripts/bootstrap installs it)")
        for sub in ("nginx/tmp", "logs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # An nginx configuration, not HTML: nothing to escape (Ansible renders it the same way).
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(ROLE_TEMPLATES), autoescape=False,  # noqa: S701
            undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
        )
        conf = self.root / "nginx" / "nginx.conf"
        conf.write_text(env.get_template("nginx/nginx.conf.j2").render(
            docs_nginx_user=getpass.getuser(), docs_root_dir=str(self.root),
            docs_nginx_mime_types="/etc/nginx/mime.types", docs_listen_address="127.0.0.1",
            docs_port=self.port, docs_site_dir=str(site_dir), docs_program_name="net-docs",
            docs_service_manager="supervisor", docs_tls=False,  # as on the local network
        ))
        log = (self.root / "logs" / "stdout.log").open("wb")
        self.proc = subprocess.Popen(
            [nginx, "-p", f"{self.root}/nginx/", "-c", str(conf), "-g", "daemon off;"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2):
                    return
            except (urllib.error.URLError, ConnectionError):
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise AssertionError(
            "nginx did not serve the site: " + (self.root / "logs" / "nginx-error.log").read_text()
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: nginx's fast shutdown, workers included
            self.proc.wait(timeout=30)


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    server = Nginx(tmp_path / "nginx-root", free_port())
    try:
        yield server
    finally:
        server.stop()


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return resp.read()


def listed(nginx: Nginx) -> dict[str, str]:
    """The inventory lines the release page gives for the current release, as a reader sees
    them (the page's text, tags and highlighting stripped)."""
    page = html.unescape(re.sub(r"<[^>]+>", "", fetch(nginx.url + "/releases/").decode()))
    found = dict(re.findall(r"^(genesis_preflight_\w+): (\S+)$", page, re.M))
    assert len(found) == 4, page
    return found


# The operator suite's fixtures (an sshd on a loopback address, two development-node
# authorities, the full-node play over SSH), for the play that takes the site's
# release files.
from tests.operator.conftest import (  # noqa: E402, F401
    authority_ports,
    keystores,
    localnet,
    operator,
    specs,
    sshd,
)
