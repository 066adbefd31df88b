"""An operator's full node provisioned from the docs site: playbooks/full_node.yml with
genesis_preflight_chainspec_src and genesis_preflight_binary_src pointing at the site's
/releases/current/ files (the raw spec and the development-node bundle) and the sha256 its
release page lists; after a network reset the same URLs give the new genesis, and a re-run
moves the node to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ops_tools.docsite.bundle import CachedBundle
from ops_tools.docsite.publish import Release
from tests.docsite.conftest import Nginx, Site, listed
from tests.operator.conftest import HOST, LocalNet, Operator, PlayResult, Rendered, rpc


def play_from_site(
    operator: Operator, localnet: LocalNet, spec: Rendered, nginx: Nginx
) -> PlayResult:
    return operator.play(spec, localnet.rpc_url, localnet.bootnodes, **listed(nginx))


@pytest.mark.slow
def test_full_node_from_the_sites_current_release(
    specs: dict[str, Rendered], localnet: LocalNet, operator: Operator, nginx: Nginx,
    bundle: CachedBundle, tmp_path: Path,
) -> None:
    current, other = specs["current"], specs["other"]
    localnet.start(current)
    site = Site(tmp_path / "store", tmp_path / "site",
                {"rpc_url": localnet.rpc_url, "docs_url": nginx.url})
    cache = bundle.path.parent.parent
    site.publish_site(Release(current.raw.parent, "devnode"), bundle_cache=cache)
    nginx.start(site.site)

    shown = listed(nginx)
    assert shown["genesis_preflight_chainspec_src"] == nginx.url + "/releases/current/raw.json"
    assert shown["genesis_preflight_chainspec_sha256"] == current.sha256
    # The node is the site's bundle, not this checkout's devnode.
    assert shown["genesis_preflight_binary_src"] == nginx.url + "/releases/current/devnode"
    assert shown["genesis_preflight_binary_sha256"] == bundle.sha256
    first = play_from_site(operator, localnet, current, nginx)
    assert first.rc == 0 and first.recap[HOST]["failed"] == 0, first.output
    assert rpc(operator.rpc_url, "chain_getBlockHash", [0]) == current.genesis
    assert rpc(localnet.http(), "chain_getBlockHash", [0]) == current.genesis

    # A reset onto another revision; the site publishes the new genesis at the same URL.
    localnet.stop()
    localnet.start(other)
    site.publish_site(Release(other.raw.parent, "devnode"), bundle_cache=cache)
    index = json.loads((site.store / "index.json").read_text())
    assert [r["genesis_hash"] for r in index["releases"]] == [other.genesis, current.genesis]
    assert listed(nginx)["genesis_preflight_chainspec_sha256"] == other.sha256
    moved = play_from_site(operator, localnet, other, nginx)
    assert moved.rc == 0 and moved.recap[HOST]["failed"] == 0, moved.output
    assert rpc(operator.rpc_url, "chain_getBlockHash", [0]) == other.genesis
