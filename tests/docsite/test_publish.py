"""ops_tools.docsite.publish, what the docs role and `ops-tools docs publish --site` run: the
release carries the development-node bundle (downloaded from the served site it has the listed
sha256 and runs with the system python3 on the downloaded spec, serving its genesis); a
publication whose inputs the served site records does nothing; check mode writes nothing;
release.json names the current genesis."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
from pathlib import Path

import pytest

from ops_tools.docsite.bundle import CachedBundle, cached_bundle
from ops_tools.docsite.inputs import read_record
from ops_tools.docsite.publish import Release, publish_site
from tests.conftest import free_port
from tests.docsite.conftest import DEVNODE, ROOT, Nginx, Site, fetch, listed
from tests.operator.conftest import rpc

SYSTEM_PYTHON = Path("/usr/bin/python3")


def genesis_of(render_dir: Path) -> str:
    return json.loads((render_dir / "manifest.json").read_text())["genesis_hash"]


def test_the_served_bundle_is_listed_and_runs_with_the_system_python(
    renders: dict[str, Path], bundle: CachedBundle, site: Site, nginx: Nginx, tmp_path: Path
) -> None:
    if not SYSTEM_PYTHON.exists():
        pytest.skip("no /usr/bin/python3 (Debian's python3)")
    site.endpoints["docs_url"] = nginx.url
    done = site.publish_site(Release(renders["first"], "devnode"),
                             bundle_cache=bundle.path.parent.parent)
    assert done.published and done.built and not done.up_to_date
    assert done.bundle == {"path": str(bundle.path), "sha256": bundle.sha256, "built": False}
    nginx.start(site.site)

    shown = listed(nginx)
    assert shown["genesis_preflight_binary_src"] == nginx.url + "/releases/current/devnode"
    assert shown["genesis_preflight_binary_sha256"] == bundle.sha256
    release = json.loads(fetch(nginx.url + "/releases/current/release.json"))
    assert release["genesis_hash"] == genesis_of(renders["first"])
    assert release["files"]["devnode"]["sha256"] == bundle.sha256
    node = tmp_path / "download" / "devnode"
    node.parent.mkdir()
    node.write_bytes(fetch(shown["genesis_preflight_binary_src"]))
    node.chmod(0o755)
    assert hashlib.sha256(node.read_bytes()).hexdigest() == bundle.sha256
    spec = tmp_path / "download" / "raw.json"
    spec.write_bytes(fetch(shown["genesis_preflight_chainspec_src"]))

    # Outside this checkout's virtualenv: Debian's python3, nothing of the project on its path.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "NET_DEVNODE_CACHE": str(tmp_path / "unpacked")}
    version = subprocess.run([str(SYSTEM_PYTHON), str(node), "--version"], env=env,
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    ours = subprocess.run([str(DEVNODE), "--version"], capture_output=True, text=True,
                          timeout=60, check=True)
    # The same node and runtime spec; the build suffix differs (a source checkout names its
    # commit, the bundle says "static").
    def without_build(text: str) -> str:
        return re.sub(r"^(devnode \d+\.\d+\.\d+)-\S+", r"\1", text.strip())

    assert without_build(version.stdout) == without_build(ours.stdout)

    rpc_port = free_port()
    log = (tmp_path / "node.log").open("wb")
    proc = subprocess.Popen(
        [str(SYSTEM_PYTHON), str(node), "--chain", str(spec), "--alice", "--tmp",
         "--rpc-port", str(rpc_port), "--port", str(free_port()), "--no-prometheus"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, cwd=tmp_path,
    )
    log.close()
    try:
        deadline, served = time.monotonic() + 60, None
        while served is None and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "node.log").read_text()[-2000:]
            try:
                served = rpc(f"http://127.0.0.1:{rpc_port}", "chain_getBlockHash", [0])
            except (OSError, urllib.error.URLError, ValueError, RuntimeError):
                time.sleep(0.3)
        assert served == release["genesis_hash"], (tmp_path / "node.log").read_text()[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def test_the_bundle_cache_reuses_a_build_of_the_same_sources(bundle: CachedBundle) -> None:
    again = cached_bundle(bundle.path.parent.parent, bundle.digest)
    assert (again.path, again.sha256, again.built) == (bundle.path, bundle.sha256, False)
    assert hashlib.sha256(bundle.path.read_bytes()).hexdigest() == bundle.sha256


def _project(tmp_path: Path) -> Path:
    """A copy of the site's sources (mkdocs.yml, docs/, the operator guides) to edit."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    for inv in ("operator", "testnet"):
        (root / "inventories" / inv).mkdir(parents=True)
        shutil.copy(ROOT / "inventories" / inv / "README.md", root / "inventories" / inv)
    return root


def test_same_inputs_do_nothing_and_a_changed_source_rebuilds(
    renders: dict[str, Path], tmp_path: Path
) -> None:
    root = _project(tmp_path)
    store, site = tmp_path / "store", tmp_path / "site"
    # The node file of a substrate release is only copied and hashed: the launcher will do.
    release = Release(renders["first"], "substrate", DEVNODE)

    def publish(check: bool = False):
        return publish_site(store, site, {"docs_url": "http://127.0.0.1:1"}, release,
                            project_root=root, check=check)

    predicted = publish(check=True)
    assert predicted.changed and not store.exists() and not site.exists()
    first = publish()
    assert first.changed and first.published and first.built
    assert read_record(site) is not None and read_record(site).inputs == first.inputs
    again = publish()
    assert (again.changed, again.up_to_date, again.build_dir) == (False, True, first.build_dir)
    assert publish(check=True).changed is False

    (root / "docs" / "docsite.md").write_text(
        (root / "docs" / "docsite.md").read_text() + "\nOne more line.\n"
    )
    edited = publish()
    assert edited.built and not edited.published and not edited.up_to_date
    assert edited.build_dir != first.build_dir
    assert "One more line." in (site / "reference" / "docsite" / "index.html").read_text()

    # A new render: published, the previous release replaced, then nothing again.
    moved = publish_site(store, site, {"docs_url": "http://127.0.0.1:1"},
                         Release(renders["second"], "substrate", DEVNODE), project_root=root)
    assert moved.published and moved.replaced == genesis_of(renders["first"])
    assert moved.current_genesis == genesis_of(renders["second"])
    served = json.loads((site / "releases" / "current" / "release.json").read_text())
    assert served["genesis_hash"] == moved.current_genesis
    assert publish_site(store, site, {"docs_url": "http://127.0.0.1:1"},
                        Release(renders["second"], "substrate", DEVNODE),
                        project_root=root).up_to_date


def test_a_recorded_build_whose_release_file_is_gone_is_built_again(
    renders: dict[str, Path], tmp_path: Path
) -> None:
    """The site's record says these inputs are built and served; a file of the current release
    was deleted from the served build: the record is not trusted, the site is built again."""
    root = _project(tmp_path)
    store, site = tmp_path / "store", tmp_path / "site"

    def publish():
        return publish_site(store, site, {"docs_url": "http://127.0.0.1:1"},
                            Release(renders["first"], "substrate", DEVNODE), project_root=root)

    first = publish()
    raw = site / "releases" / "current" / "raw.json"
    assert raw.is_file() and publish().up_to_date
    raw.unlink()
    again = publish()
    assert again.built and not again.up_to_date and raw.is_file()
    assert publish().up_to_date  # and then nothing again
    assert first.inputs == again.inputs


def test_a_substrate_release_needs_its_binary(renders: dict[str, Path], tmp_path: Path) -> None:
    from ops_tools.errors import InputError

    with pytest.raises(InputError, match="node binary"):
        publish_site(tmp_path / "s", tmp_path / "site", {}, Release(renders["first"], "substrate"))
    with pytest.raises(InputError, match="node kind 'docker'"):
        publish_site(tmp_path / "s", tmp_path / "site", {},
                     Release(renders["first"], "docker", DEVNODE))
    assert not (tmp_path / "s").exists()
