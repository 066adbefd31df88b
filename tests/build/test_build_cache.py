"""The build pipeline through its Python API on a real git repository and a real cargo."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ops_tools.build.artifact import load_artifact
from ops_tools.build.builder import BuildRequest, build
from ops_tools.chainspec.runtime import read_runtime_version
from tests.build.conftest import CargoSpy, SuiteRepo, git


def test_commit_sequence_builds_once_per_revision(suite: SuiteRepo, cache: Path,
                                                  cargo_spy: CargoSpy):
    rev1 = git(suite.path, "rev-parse", "HEAD")

    first = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    assert not first.cache_hit
    assert first.artifact.manifest["revision"] == rev1
    assert len(cargo_spy.builds()) == 1
    assert "--locked" in cargo_spy.builds()[0] and "--release" in cargo_spy.builds()[0]
    calls_after_build = len(cargo_spy.calls())

    again = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    assert again.cache_hit
    assert again.artifact.directory == first.artifact.directory
    assert len(cargo_spy.calls()) == calls_after_build, "a cache hit must start no cargo at all"

    rev2 = suite.commit("commit 2: spec_version 7", suite.set_spec_version(7))
    second = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    assert not second.cache_hit
    assert second.artifact.manifest["revision"] == rev2 != rev1
    assert second.artifact.directory != first.artifact.directory
    blake = "runtime_blake2_256"
    assert second.artifact.manifest[blake] != first.artifact.manifest[blake]
    assert second.artifact.manifest["runtime_spec_version"] == 7
    assert first.artifact.manifest["runtime_spec_version"] == 6
    assert len(cargo_spy.builds()) == 2

    calls = len(cargo_spy.calls())
    back = build(BuildRequest(repo=str(suite.path), ref=rev1, cache=cache))
    assert back.cache_hit
    assert back.artifact.directory == first.artifact.directory
    assert len(cargo_spy.calls()) == calls


def test_manifest_records_provenance_and_matches_the_files(suite: SuiteRepo, cache: Path):
    result = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    art = load_artifact(result.artifact.directory)
    m = art.manifest
    on_disk = json.loads((art.directory / "manifest.json").read_text())
    assert on_disk == m
    assert m["repo"] == str(suite.path) and m["ref"] == "main"
    assert m["features"] == ["dev-runtime"]
    assert m["rustc_version"].startswith("rustc ") and m["cargo_version"].startswith("cargo ")
    assert m["toolchain_id"] in m["key"] and m["revision"] in m["key"]
    assert m["commit_time"] == int(git(suite.path, "show", "-s", "--format=%ct", "HEAD"))
    assert m["build_duration_s"] > 0
    assert m["runtime_state_version"] == 1 and m["runtime_spec_name"] == "net-runtime"
    version = read_runtime_version(art.runtime.read_bytes())
    assert version is not None and version.spec_version == m["runtime_spec_version"]
    assert art.runtime.name == "net_runtime.compact.compressed.wasm"
    assert (art.directory / "build.log").read_text().count("Compiling net-node") == 1
    # The artifact's node binary is the one the smoke check ran.
    out = subprocess.run([str(art.node_binary), "--version"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == m["node_version"]
    # The binary knows the testnet chain and embeds exactly the collected runtime blob.
    spec = json.loads(subprocess.run([str(art.node_binary), "build-spec", "--chain", "net_testnet"],
                                     capture_output=True, text=True, check=True).stdout)
    assert spec["genesis"]["runtimeGenesis"]["code"] == "0x" + art.runtime.read_bytes().hex()


def test_branch_tag_and_short_sha_name_one_artifact(suite: SuiteRepo, cache: Path,
                                                   cargo_spy: CargoSpy):
    rev = git(suite.path, "rev-parse", "HEAD")
    git(suite.path, "tag", "-a", "v1", "-m", "release v1")  # annotated: must be peeled
    built = build(BuildRequest(repo=str(suite.path), ref="v1", cache=cache))
    assert built.artifact.manifest["revision"] == rev
    for ref in ("main", rev[:9], rev, "HEAD"):
        hit = build(BuildRequest(repo=str(suite.path), ref=ref, cache=cache))
        assert hit.cache_hit and hit.key == built.key, ref
    assert len(cargo_spy.builds()) == 1


def test_force_rebuilds_bit_for_bit(suite: SuiteRepo, cache: Path, tmp_path: Path,
                                    cargo_spy: CargoSpy):
    first = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    forced = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache, force=True))
    assert not forced.cache_hit and len(cargo_spy.builds()) == 2
    assert forced.artifact.directory == first.artifact.directory
    # Another cache at another path (so other worktree and target paths): same bytes, because
    # paths are remapped and the target dir is per build.
    elsewhere = build(BuildRequest(repo=str(suite.path), ref="main",
                                   cache=tmp_path / "other cache with spaces"))
    for field in ("node_binary_sha256", "runtime_sha256", "runtime_blake2_256"):
        assert forced.artifact.manifest[field] == first.artifact.manifest[field]
        assert elsewhere.artifact.manifest[field] == first.artifact.manifest[field]
    # The fixture records where its generated source was compiled (as a real runtime's
    # include!(OUT_DIR/...) does): the path must be the remapped one, not the cache's.
    info = subprocess.run([str(forced.artifact.node_binary), "--build-info"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert info.startswith("/build/target/release/build/net-runtime-"), info
    for art in (forced.artifact, elsewhere.artifact):
        assert str(art.directory.parents[1]) not in art.node_binary.read_bytes().decode("latin-1")


def test_features_are_part_of_the_key(suite: SuiteRepo, cache: Path):
    with_pkg = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache,
                                  package="net-node"))
    plain = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    assert not plain.cache_hit and with_pkg.key != plain.key
    assert with_pkg.artifact.manifest["package"] == "net-node"


def test_damaged_cache_entry_is_rebuilt_not_served(suite: SuiteRepo, cache: Path,
                                                   cargo_spy: CargoSpy):
    first = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    first.artifact.runtime.write_bytes(b"\0asm\x01\0\0\0")
    again = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache))
    assert not again.cache_hit and len(cargo_spy.builds()) == 2
    assert again.artifact.manifest["runtime_sha256"] == first.artifact.manifest["runtime_sha256"]
    load_artifact(again.artifact.directory)


def test_head_of_a_path_repo_is_what_is_checked_out(suite: SuiteRepo, cache: Path):
    rev1 = git(suite.path, "rev-parse", "HEAD")
    build(BuildRequest(repo=str(suite.path), ref="HEAD", cache=cache))  # mirror created on main
    git(suite.path, "checkout", "-q", "-b", "other")
    rev_other = suite.commit("spec 8 on a branch", suite.set_spec_version(8))
    on_branch = build(BuildRequest(repo=str(suite.path), ref="HEAD", cache=cache))
    assert on_branch.artifact.manifest["revision"] == rev_other != rev1
    # A commit on no branch or tag is fetched by sha.
    git(suite.path, "checkout", "-q", "--detach")
    rev_detached = suite.commit("spec 9, detached", suite.set_spec_version(9))
    detached = build(BuildRequest(repo=str(suite.path), ref="HEAD", cache=cache))
    assert detached.artifact.manifest["revision"] == rev_detached
    assert detached.artifact.manifest["runtime_spec_version"] == 9
    git(suite.path, "checkout", "-q", "main")
    back = build(BuildRequest(repo=str(suite.path), ref="HEAD", cache=cache))
    assert back.cache_hit and back.artifact.manifest["revision"] == rev1


def test_url_repository(suite: SuiteRepo, cache: Path):
    # A URL is fetched as is: no dirty check (an uncommitted edit in the source is irrelevant).
    (suite.path / "runtime/src/version.rs").write_text("// uncommitted\n")
    url = f"file://{suite.path}"
    result = build(BuildRequest(repo=url, ref="main", cache=cache))
    assert result.artifact.manifest["repo"] == url
    assert result.artifact.manifest["revision"] == git(suite.path, "rev-parse", "HEAD")
    assert result.artifact.manifest["runtime_spec_version"] == 6
