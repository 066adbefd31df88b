"""Pure logic: ref and repository classification, keys, environment, glob, manifest, cargo I/O
parsing. No git, cargo or file system."""

from __future__ import annotations

import json
from pathlib import Path, PurePath

import pytest

from ops_tools.build.cargo import cargo_args, parse_message
from ops_tools.build.env import BuildPaths, build_env
from ops_tools.build.keys import artifact_key, normalize_features, toolchain_id, validate_package
from ops_tools.build.layout import DEFAULT_RUNTIME_GLOB, default_cache_dir, split_runtime_glob
from ops_tools.build.manifest import validate_manifest
from ops_tools.build.refs import classify_repo, ref_candidates, validate_ref
from ops_tools.build.smoke import feature_enabled
from ops_tools.errors import InputError

SHA = "725ff11ac966427c48e5df05a0001b954db59dcc"


@pytest.mark.parametrize("repo", ["https://github.com/org/pallet-suite.git",
                                  "ssh://git@host/org/suite", "git@github.com:org/suite.git",
                                  "file:///srv/git/suite"])
def test_urls_are_urls(repo):
    assert classify_repo(repo).kind == "url"
    assert classify_repo(repo).location == repo


def test_paths_become_absolute(tmp_path: Path):
    src = classify_repo("suite", cwd=tmp_path)
    assert src.kind == "path"
    assert src.location == str((tmp_path / "suite").resolve())


def test_mirror_names_are_readable_and_distinct():
    a = classify_repo("https://github.com/org/pallet-suite.git").mirror_name
    b = classify_repo("https://gitlab.com/org/pallet-suite.git").mirror_name
    assert a.startswith("pallet-suite-") and a.endswith(".git")
    assert a != b
    assert a == classify_repo("https://github.com/org/pallet-suite.git").mirror_name


@pytest.mark.parametrize("ref", ["", "-x", "a..b", "main~1", "v1^{}", "a b", "x:y", "ref.lock",
                                 "dir/"])
def test_bad_refs_are_refused(ref):
    with pytest.raises(InputError, match="--ref"):
        validate_ref(ref)


def test_ref_candidates_prefer_names_over_abbreviated_shas():
    assert ref_candidates("cafe") == ["refs/heads/cafe", "refs/tags/cafe", "cafe"]
    assert ref_candidates("main") == ["refs/heads/main", "refs/tags/main"]
    assert ref_candidates(SHA) == [SHA]
    assert ref_candidates("refs/tags/v1") == ["refs/tags/v1"]
    assert ref_candidates("release/v1.2") == ["refs/heads/release/v1.2", "refs/tags/release/v1.2"]


def test_features_are_order_and_duplicate_insensitive():
    assert normalize_features(["b,a", "a b"]) == ("a", "b")
    assert normalize_features([""]) == ()
    assert normalize_features(["node/dev-runtime"]) == ("node/dev-runtime",)
    with pytest.raises(InputError, match="--features: 'a;b'"):
        normalize_features(["a;b"])
    with pytest.raises(InputError, match="--package"):
        validate_package("../x")


def test_key_separates_every_input():
    tc = toolchain_id("rustc 1.95.0\nhost: x86_64")
    base = artifact_key(SHA, ("dev-runtime",), tc)
    assert base == f"{SHA}-dev-runtime-{tc}"
    others = {
        artifact_key("0" * 40, ("dev-runtime",), tc),
        artifact_key(SHA, (), tc),
        artifact_key(SHA, ("dev-runtime",), toolchain_id("rustc 1.96.0\nhost: x86_64")),
        artifact_key(SHA, ("dev-runtime",), tc, "net-node"),
    }
    assert base not in others and len(others) == 4
    assert "/" not in artifact_key(SHA, ("a/b",), tc)


def test_build_env_favours_reproducibility():
    paths = BuildPaths(PurePath("/c/worktrees/x"), PurePath("/home/u/.cargo"), PurePath("/c/t"))
    env = build_env({"PATH": "/bin", "RUSTFLAGS": "-C target-cpu=native",
                     "CARGO_TARGET_DIR": "/shared", "CARGO_INCREMENTAL": "1"}, paths, 1700000000)
    assert env["PATH"] == "/bin"
    assert "RUSTFLAGS" not in env
    assert env["CARGO_INCREMENTAL"] == "0"
    assert env["SOURCE_DATE_EPOCH"] == "1700000000"
    assert env["CARGO_TARGET_DIR"] == "/c/t"
    flags = env["CARGO_ENCODED_RUSTFLAGS"].split("\x1f")
    assert "--remap-path-prefix=/c/worktrees/x=/build/pallet-suite" in flags
    assert "--remap-path-prefix=/home/u/.cargo=/build/cargo-home" in flags
    assert "--remap-path-prefix=/c/t=/build/target" in flags
    assert "target-cpu=native" not in env["CARGO_ENCODED_RUSTFLAGS"]


def test_runtime_glob_maps_target_to_the_build_target_dir():
    in_target, rel = split_runtime_glob(DEFAULT_RUNTIME_GLOB)
    assert (in_target, rel) == (True, "release/wbuild/*/*.compact.compressed.wasm")
    assert split_runtime_glob("out/*.wasm") == (False, "out/*.wasm")
    for bad in ("/abs/*.wasm", "../x/*.wasm", ""):
        with pytest.raises(InputError, match="--runtime-glob"):
            split_runtime_glob(bad)


def test_default_cache_dir_honours_the_environment(tmp_path: Path):
    assert default_cache_dir({"OPS_TOOLS_CACHE": str(tmp_path)}) == tmp_path
    assert default_cache_dir({}).parts[-3:] == (".cache", "net-ops", "builds")


def test_cargo_args_and_messages():
    assert cargo_args(("dev-runtime",), "net-node") == [
        "build", "--release", "--locked", "--message-format=json-render-diagnostics",
        "--package", "net-node", "--features", "dev-runtime"]
    assert "--features" not in cargo_args((), None)
    msg = {"reason": "compiler-artifact", "package_id": "p", "executable": "/t/release/net-node",
           "target": {"kind": ["bin"], "name": "net-node"}}
    assert parse_message(json.dumps(msg)) == ("p", "/t/release/net-node")
    assert parse_message(json.dumps({**msg, "executable": None})) is None
    assert parse_message(json.dumps({"reason": "build-finished", "success": True})) is None
    assert parse_message("{not json") is None


def test_feature_detection():
    assert feature_enabled(("dev-runtime",))
    assert feature_enabled(("net-node/dev-runtime",))
    assert not feature_enabled(("dev-runtime-extra",))


def _manifest(**over):
    data = {"format": 1, "kind": "node", "key": "k", "repo": "r", "ref": "main", "revision": SHA,
            "features": ["dev-runtime"], "node_binary": "net-node",
            "node_binary_sha256": "a" * 64, "node_version": "v", "runtime": "r.wasm",
            "runtime_sha256": "b" * 64, "runtime_blake2_256": "0x" + "c" * 64,
            "runtime_spec_name": "net-runtime", "runtime_spec_version": 6,
            "runtime_state_version": 1, "created_at": "2026-01-01T00:00:00Z"}
    data.update(over)
    return data


@pytest.mark.parametrize(("over", "field"), [
    ({"runtime_spec_version": "6"}, "runtime_spec_version"),
    ({"format": 2}, "format"),
    ({"kind": "other"}, "kind"),
    ({"node_binary": "../../bin/sh"}, "node_binary"),
    ({"runtime": ".hidden"}, "runtime"),
    ({"runtime_sha256": "XYZ"}, "runtime_sha256"),
    ({"runtime_blake2_256": "c" * 64}, "runtime_blake2_256"),
])
def test_manifest_validation_names_the_field(over, field):
    assert validate_manifest(_manifest(), "m") is not None
    with pytest.raises(InputError, match=field):
        validate_manifest(_manifest(**over), "m")


def test_manifest_missing_field():
    data = _manifest()
    del data["revision"]
    with pytest.raises(InputError, match="'revision' is missing"):
        validate_manifest(data, "m")


def test_tokens_in_urls_are_redacted():
    from ops_tools.build.refs import redact

    assert redact("https://bob:ghp_secret@github.com/o/r.git") == "https://bob:***@github.com/o/r.git"
    assert "tok" not in redact("fatal: unable to access 'https://x:tok@h/r/': 403")
    assert redact("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert redact("https://github.com/o/r") == "https://github.com/o/r"
