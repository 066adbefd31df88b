"""One call for a whole publication: make a render the store's current release (with the real
node, or the development-node bundle), build the site and record what it was built from.

This is what ``ops-tools docs publish --site``, the docs role's action plugin and any caller
that publishes without Ansible (the reset cycle's publish phase) use::

    publish_site(store, site, endpoints, Release(render_dir, "devnode"))

A publication whose inputs are those the served site records returns at once (``up_to_date``),
reading a few small files and hashing the docs sources: no store update, no MkDocs build, no
bundle build. The heavy modules (chain-spec hashing, MkDocs) are imported only past that check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ops_tools.docsite import inputs
from ops_tools.errors import InputError

if TYPE_CHECKING:
    from ops_tools.docsite.releases import Published

NODE_KINDS = ("substrate", "devnode")


@dataclass(frozen=True)
class Release:
    """What to publish. ``node_binary``: the node binary (substrate; required). For devnode the
    release carries the development node as one executable file built from this controller's
    sources (``ops_tools.build.devnode_bundle``), whatever launcher the network runs it with."""

    render_dir: Path
    node_kind: str = "substrate"
    node_binary: Path | None = None


@dataclass(frozen=True)
class SiteResult:
    changed: bool
    up_to_date: bool  # the served site was published from these inputs: nothing was done
    published: bool  # the store's index changed
    current_genesis: str | None
    replaced: str | None
    built: bool
    site: Path
    build_dir: Path | None
    pages: int
    inputs: str
    bundle: dict[str, Any] | None = field(default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "up_to_date": self.up_to_date,
            "published": self.published,
            "current": self.current_genesis,
            "current_genesis": self.current_genesis,
            "replaced": self.replaced,
            "built": self.built,
            "site": str(self.site),
            "build": str(self.build_dir) if self.build_dir else None,
            "pages": self.pages,
            "inputs": self.inputs,
            "bundle": self.bundle,
        }


def default_bundle_cache() -> Path:
    from ops_tools.build.layout import default_cache_dir

    return default_cache_dir().with_name("devnode-bundles")


def _check(release: Release) -> None:
    if release.node_kind not in NODE_KINDS:
        raise InputError(
            f"node kind {release.node_kind!r}: expected one of {', '.join(NODE_KINDS)}"
        )
    if release.node_kind == "substrate":
        if release.node_binary is None:
            raise InputError(
                "node binary: none given; a substrate release needs the net-node binary"
                " (--node-binary; docs_release_node_binary in the docs role)"
            )
        if not release.node_binary.is_file():
            raise InputError(f"node binary {release.node_binary}: no such file")
    if not (release.render_dir / "raw.json").is_file():
        raise InputError(
            f"render dir {release.render_dir}: no raw.json; pass the output directory of"
            " 'ops-tools chainspec render'"
        )


def publish_site(
    store: Path,
    site: Path,
    endpoints: dict[str, str],
    release: Release | None,
    *,
    project_root: Path | None = None,
    bundle_cache: Path | None = None,
    check: bool = False,
    force: bool = False,
) -> SiteResult:
    """Publish ``release`` (None: rebuild from the store as it is) and build the site at
    ``site``. ``check``: only say whether anything would change (Ansible's check mode)."""
    from ops_tools.deploy.paths import PROJECT_ROOT
    from ops_tools.docsite.sources import default_sources

    site = site.absolute()
    sources = default_sources(project_root or PROJECT_ROOT)
    node_key = None
    if release is not None:
        _check(release)
        if release.node_kind == "devnode":
            from ops_tools.docsite.bundle import source_digest

            node_key = source_digest()
        else:
            assert release.node_binary is not None
            node_key = inputs.stat_key(release.node_binary)

    def digest() -> str:
        return inputs.inputs_digest(
            mkdocs_config=sources.mkdocs_config, docs_dir=sources.docs_dir,
            guides=sources.guides, store=store, endpoints=endpoints,
            render_dir=release.render_dir if release else None,
            node_kind=release.node_kind if release else None, node_key=node_key,
        )

    before = digest()
    record = inputs.read_record(site)
    # A record of these inputs whose build is no longer served as recorded is built again.
    stale = record is not None and record.inputs == before and not inputs.served(site, record)
    if not force and record is not None and record.inputs == before and not stale:
        return SiteResult(False, True, False, record.current_genesis, None, False, site,
                          site.with_name(site.name + ".builds") / record.build, record.pages,
                          before)
    if check:
        return SiteResult(True, False, release is not None, None, None, True, site, None, 0,
                          before)

    from ops_tools.docsite.build import build_site

    published, replaced, bundle_json = False, None, None
    if release is not None:
        result, bundle_json = _publish(store, release, node_key, bundle_cache)
        published = result.changed
        replaced = result.replaced["genesis_hash"] if result.replaced else None
    built = build_site(sources, store, endpoints, site, force=force or stale)
    after = digest()  # the index the site now shows is part of what it was built from
    inputs.write_record(site, inputs.Record(after, built.build_dir.name, built.current_genesis,
                                            built.pages))
    return SiteResult(
        published or built.changed, False, published, built.current_genesis, replaced,
        built.changed, site, built.build_dir, built.pages, after, bundle_json,
    )


def _publish(
    store: Path, release: Release, node_key: str | None, bundle_cache: Path | None
) -> tuple[Published, dict[str, Any] | None]:
    from ops_tools.docsite.store import publish_release

    if release.node_kind == "devnode":
        from ops_tools.docsite.bundle import cached_bundle

        bundle = cached_bundle(bundle_cache or default_bundle_cache(), node_key)
        result = publish_release(store, release.render_dir, bundle.path, "devnode",
                                 node_sha256=bundle.sha256)
        return result, {"path": str(bundle.path), "sha256": bundle.sha256, "built": bundle.built}
    assert release.node_binary is not None
    return publish_release(store, release.render_dir, release.node_binary, "substrate"), None


def publish_store(
    store: Path, release: Release, *, bundle_cache: Path | None = None
) -> Published:
    """Only the store: ``release`` becomes its current release (no site is built)."""
    _check(release)
    return _publish(store, release, None, bundle_cache)[0]
