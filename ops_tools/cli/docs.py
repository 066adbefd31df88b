"""``ops-tools docs``: the docs reference site and the network's published releases."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ops_tools.cli.output import console, print_json, progress
from ops_tools.deploy.paths import PROJECT_ROOT
from ops_tools.errors import InputError

if TYPE_CHECKING:
    from ops_tools.docsite.build import Built

app = typer.Typer(
    help="The docs reference site: publish a release, build the site.", no_args_is_help=True
)


def _endpoints(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, url = pair.partition("=")
        if not sep or not key or not url:
            raise InputError(f"--endpoint {pair!r}: expected NAME=URL, e.g. rpc_url=wss://rpc.example")
        out[key] = url
    return out


@app.command("publish")
def publish(
    store: Path = typer.Option(
        ..., "--store", help="Release store directory (created if missing)."
    ),
    render_dir: Path = typer.Option(
        ..., "--render-dir", help="Output of 'ops-tools chainspec render' (raw.json, manifest)."
    ),
    node_binary: Path | None = typer.Option(
        None, "--node-binary",
        help="The node binary (substrate). Not used for devnode: the release carries the"
        " development-node bundle built from this controller's sources.",
    ),
    node_kind: str = typer.Option(
        "substrate", "--node-kind", help="substrate (a node binary) or devnode (development node)."
    ),
    site: Path | None = typer.Option(
        None, "--site", help="Then build the site there, as 'docs build' does (one process)."
    ),
    endpoint: list[str] = typer.Option(
        [], "--endpoint", help="With --site: a public endpoint, NAME=URL."
    ),
    bundle_cache: Path | None = typer.Option(
        None, "--bundle-cache",
        help="devnode: cache of development-node bundles (default"
        " ~/.cache/net-ops/devnode-bundles).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Make a render the current release; the one before it is marked replaced. With --site,
    nothing is done when the served site was published from the same inputs."""
    from ops_tools.docsite.publish import Release, publish_site

    endpoints = _endpoints(endpoint)  # bad input refused before anything is written
    release = Release(render_dir, node_kind, node_binary)
    if site is None:
        from ops_tools.docsite.publish import publish_store

        result = publish_store(store, release, bundle_cache=bundle_cache)
        out = {"changed": result.changed, "published": result.changed,
               "current": result.current["genesis_hash"],
               "replaced": result.replaced["genesis_hash"] if result.replaced else None,
               "store": str(store)}
    else:
        with progress("publishing the release and building the docs site", not json_out):
            done = publish_site(store, site, endpoints, release, project_root=PROJECT_ROOT,
                                bundle_cache=bundle_cache)
        out = {**done.to_json(), "store": str(store)}
    if json_out:
        print_json(out)
        return
    state = "published" if out["published"] else "already current"
    console.print(f"release {out['current']}: {state} in {store}", markup=False)
    if out.get("replaced"):
        console.print(f"replaced: {out['replaced']}", markup=False)
    if site is not None:
        built = "built" if out["built"] else "unchanged"
        console.print(f"{built}: {out['site']} -> {out['build']} ({out['pages']} pages)",
                      markup=False)


def _built_json(built: Built) -> dict[str, object]:
    return {
        "site": str(built.site),
        "build": str(built.build_dir),
        "built": built.changed,
        "current_genesis": built.current_genesis,
        "pages": built.pages,
    }


def _print_built(built: Built) -> None:
    state = "built" if built.changed else "unchanged"
    console.print(f"{state}: {built.site} -> {built.build_dir} ({built.pages} pages)")


@app.command("build")
def build(
    store: Path = typer.Option(..., "--store", help="Release store directory."),
    site: Path = typer.Option(
        ..., "--site", help="Path of the served site (a link this command switches to each build)."
    ),
    endpoint: list[str] = typer.Option(
        [], "--endpoint", help="A public endpoint, NAME=URL (rpc_url, docs_url, faucet_url, ...)."
    ),
    force: bool = typer.Option(False, "--force", help="Build even when nothing changed."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Build the site with mkdocs --strict, check its links, switch the site to it."""
    from ops_tools.docsite.build import build_site, default_sources

    with progress("building the docs site", not json_out):
        built = build_site(
            default_sources(PROJECT_ROOT), store, _endpoints(endpoint), site.absolute(), force
        )
    if json_out:
        print_json({"changed": built.changed, **_built_json(built)})
        return
    _print_built(built)
