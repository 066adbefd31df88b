"""Only each service's public paths go through the testnet's edge (issue 29).

The edge proxies a site's ``location /`` and answers 404 for the locations in
``edge_hidden_paths`` and the site's ``hidden_paths``: a list of what is not public. This test
keeps that list complete: it builds every service's app as the service does (``build_app``, no
server, no chain: the genesis is given) and takes every route it serves; each must be either in
the public list below (what the docs name as the service's API, and the platform's probes) or
hidden at the edge for that service's site. A route a service gains later (an administration
endpoint, a debug page) fails here until it is declared public or hidden. What nginx does with
the locations is checked on a running edge (roles/edge/molecule/systemd, the testnet shape)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GENESIS = "0x" + "11" * 32
DEAD_RPC = "ws://127.0.0.1:9"  # never asked: the genesis is configured

PLATFORM = {"/health", "/ready", "/version"}
PUBLIC: dict[str, set[str]] = {
    "faucet": PLATFORM | {"/info", "/drip-public"},
    "attestation": PLATFORM | {"/v1/attest", "/v1/reports", "/v1/reports/{report_hash}",
                               "/v1/verify", "/v1/roots"},
    "explorer": PLATFORM | {"/", "/reports/{report_hash}", "/reports/{report_hash}/report.json",
                            "/reports/{report_hash}/quote.bin",
                            "/reports/{report_hash}/gpu/{index}/evidence.bin",
                            "/reports/{report_hash}/gpu/{index}/certificate.pem",
                            "/operators/{operator_id}"},
    "indexer": PLATFORM | {"/graphql"},
    "gateway": PLATFORM | {"/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                           "/v1/models", "/v1/usage", "/v1/workers/announce",
                           "/v1/workers/heartbeat", "/v1/workers/mine"},
}


def _secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    os.chmod(path, 0o600)
    return path


def _faucet(tmp: Path) -> Any:
    from ops_tools.services.faucet.app import build_app
    from ops_tools.services.faucet.config import FaucetSettings

    return build_app(FaucetSettings(
        listen_port=1, state_dir=tmp / "state", rpc_url=DEAD_RPC, genesis_hash=GENESIS,
        database_url=f"sqlite:///{tmp}/f.db", seed_file=_secret(tmp / "seed", "//EdgePaths")))


def _attestation(tmp: Path) -> Any:
    from ops_tools.services.attestation.app import build_app
    from ops_tools.services.attestation.config import AttestationSettings

    return build_app(AttestationSettings(
        listen_port=1, state_dir=tmp / "state", rpc_url=DEAD_RPC, genesis_hash=GENESIS,
        database_url=f"sqlite:///{tmp}/a.db",
        mock_root_seed_file=_secret(tmp / "seed", "edge-public-paths-seed-0123456789")))


def _explorer(tmp: Path) -> Any:
    from ops_tools.services.explorer.app import build_app
    from ops_tools.services.explorer.config import ExplorerSettings

    return build_app(ExplorerSettings(listen_port=1, state_dir=tmp / "state", rpc_url=DEAD_RPC,
                                      genesis_hash=GENESIS))


def _indexer(tmp: Path) -> Any:
    from ops_tools.services.indexer.app import build_app
    from ops_tools.services.indexer.config import IndexerSettings

    return build_app(IndexerSettings(listen_port=1, state_dir=tmp / "state", rpc_url=DEAD_RPC,
                                     genesis_hash=GENESIS, database_url=f"sqlite:///{tmp}/i.db"))


def _gateway(tmp: Path) -> Any:
    from ops_tools.services.gateway.app import build_app
    from ops_tools.services.gateway.config import GatewaySettings

    return build_app(GatewaySettings(
        listen_port=1, state_dir=tmp / "state", rpc_url=DEAD_RPC, genesis_hash=GENESIS,
        database_url=f"sqlite:///{tmp}/g.db",
        worker_secret_file=_secret(tmp / "worker", "edge-public-paths-worker-0123")))


BUILD: dict[str, Callable[[Path], Any]] = {
    "faucet": _faucet, "attestation": _attestation, "explorer": _explorer,
    "indexer": _indexer, "gateway": _gateway,
}


def _paths(routes: list[Any]) -> Iterator[str]:
    """Every path the app routes. FastAPI keeps an included router as one entry whose routes
    carry their path with the include's prefix (``effective_route_contexts``)."""
    for route in routes:
        path = getattr(route, "path", None)
        if isinstance(path, str):
            yield path
        elif hasattr(route, "effective_route_contexts"):
            for context in route.effective_route_contexts():
                # A WebSocket route's prefixed path is on its Starlette route only.
                yield context.path or context.starlette_route.path
        else:  # a route kind this walk does not know would go unchecked: fail instead
            raise AssertionError(f"cannot read the path of {route!r}")


def _edge_hidden(site: str) -> list[str]:
    defaults = yaml.safe_load((ROOT / "roles/edge/defaults/main.yml").read_text())
    testnet = yaml.safe_load((ROOT / "inventories/testnet/group_vars/edge/main.yml").read_text())
    return list(defaults["edge_hidden_paths"]) + list(
        testnet["edge_site_catalog"][site].get("hidden_paths", []))


def _hidden(path: str, locations: list[str]) -> bool:
    """Whether nginx picks one of the 404 locations for ``path``: the site's only other
    location is ``/``, the shortest prefix, so any matching one of them wins."""
    for location in locations:
        modifier, _, rest = location.partition(" ")
        if not rest:
            modifier, rest = "", location
        if modifier in ("", "^~") and path.startswith(rest):
            return True
        if modifier == "=" and path == rest:
            return True
        if modifier == "~" and re.search(rest, path):
            return True
        if modifier == "~*" and re.search(rest, path, re.IGNORECASE):
            return True
    return False


def _concrete(template: str) -> str:
    return re.sub(r"\{[^}]+\}", "0x" + "ab" * 32, template)


def test_the_location_reader_follows_nginx() -> None:
    locations = ["/metrics", "= /exact", "~ ^/v1/workers/?$", "~* ^/ADMIN"]
    assert _hidden("/metrics", locations) and _hidden("/metrics/x", locations)
    assert _hidden("/exact", locations) and not _hidden("/exact/x", locations)
    assert _hidden("/v1/workers/", locations) and not _hidden("/v1/workers/mine", locations)
    assert _hidden("/admin/keys", locations) and not _hidden("/", locations)


@pytest.mark.parametrize("service", list(BUILD))
def test_every_route_is_public_or_hidden_at_the_edge(service: str, tmp_path: Path) -> None:
    app = BUILD[service](tmp_path)
    routes = set(_paths(app.routes))
    locations = _edge_hidden(service)
    assert PUBLIC[service] <= routes, f"declared public but not served: {PUBLIC[service] - routes}"
    exposed = sorted(r for r in routes - PUBLIC[service] if not _hidden(_concrete(r), locations))
    assert not exposed, (
        f"{service}: {exposed} would be proxied to the internet by the edge; add it to the"
        f" site's hidden_paths (inventories/testnet/group_vars/edge/main.yml) or, if it is"
        f" public, to PUBLIC here")
    blocked = sorted(r for r in PUBLIC[service] if _hidden(_concrete(r), locations))
    assert not blocked, f"{service}: public routes the edge answers 404: {blocked}"
    # The monitoring's and the API documentation's routes are among the hidden ones.
    assert {"/metrics", "/openapi.json", "/docs"} <= routes - PUBLIC[service]
