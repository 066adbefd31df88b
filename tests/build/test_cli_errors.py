"""Bad input and failed builds through `ops-tools node build`: one clear error line, non-zero
exit, no artifact left, and the cache still serves the next good build."""

from __future__ import annotations

import json
from pathlib import Path

from tests.build.conftest import VERSION_RS, CargoSpy, SuiteRepo, artifact_dirs, git, run_cli


def _error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def _good_build_still_works(suite: SuiteRepo, cache: Path) -> dict:
    ok = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main", "--cache", str(cache),
                 "--json")
    assert ok.returncode == 0, ok.stderr
    return json.loads(ok.stdout)


def test_unknown_ref(suite: SuiteRepo, cache: Path):
    proc = run_cli("node", "build", "--repo", str(suite.path), "--ref", "no-such-branch",
                   "--cache", str(cache))
    assert proc.returncode == 2
    line = _error_line(proc.stderr)
    assert "--ref 'no-such-branch'" in line and "branch, tag or commit" in line
    assert artifact_dirs(cache) == []
    missing_sha = run_cli("node", "build", "--repo", str(suite.path), "--ref", "f" * 40,
                          "--cache", str(cache))
    assert missing_sha.returncode == 2 and "no commit" in _error_line(missing_sha.stderr)
    _good_build_still_works(suite, cache)


def test_repository_not_found(tmp_path: Path, cache: Path):
    proc = run_cli("node", "build", "--repo", str(tmp_path / "nowhere"), "--ref", "main",
                   "--cache", str(cache))
    assert proc.returncode == 2
    assert "repository not found" in _error_line(proc.stderr)
    url = run_cli("node", "build", "--repo", f"file://{tmp_path}/nowhere.git", "--ref", "main",
                  "--cache", str(cache))
    assert url.returncode == 2
    assert "repository not found" in _error_line(url.stderr)
    (tmp_path / "plain-dir").mkdir()
    plain = run_cli("node", "build", "--repo", str(tmp_path / "plain-dir"), "--ref", "main",
                    "--cache", str(cache))
    assert plain.returncode == 2 and "not a git repository" in _error_line(plain.stderr)
    assert artifact_dirs(cache) == []
    # A failed clone leaves no half mirror behind.
    assert [p.name for p in (cache / "git").iterdir() if p.name.startswith(".")] == []


def test_dirty_worktree_is_refused_unless_allowed(suite: SuiteRepo, cache: Path):
    (suite.path / VERSION_RS).write_text("// uncommitted edit\n")
    proc = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main",
                   "--cache", str(cache))
    assert proc.returncode == 2
    line = _error_line(proc.stderr)
    assert "dirty" in line and VERSION_RS in line and "--allow-dirty" in line
    assert artifact_dirs(cache) == []
    # --allow-dirty builds the committed revision: the edit (which would not compile) is ignored.
    allowed = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main",
                      "--cache", str(cache), "--allow-dirty", "--json")
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["runtime_spec_version"] == 6
    # Untracked files are not part of any commit and do not make the checkout dirty.
    git(suite.path, "checkout", "--", VERSION_RS)
    (suite.path / "notes.txt").write_text("scratch")
    assert _good_build_still_works(suite, cache)["cache_hit"] is True


def test_cargo_failure_shows_the_log_tail_and_leaves_nothing(suite: SuiteRepo, cache: Path,
                                                             cargo_spy: CargoSpy):
    suite.commit("commit 2: breaks compilation",
                 {VERSION_RS: "pub const SPEC_VERSION: u32 = \"not a number\";\n"})
    proc = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main",
                   "--cache", str(cache), env=cargo_spy.env())
    assert proc.returncode == 1
    line = _error_line(proc.stderr)
    assert "cargo build --release --locked failed" in line and "full log:" in line
    assert "last lines of" in proc.stderr and "mismatched types" in proc.stderr
    assert artifact_dirs(cache) == []
    log = Path(line.split("full log: ", 1)[1].strip())
    assert "mismatched types" in log.read_text()
    # The cache is usable: fix the suite, build the fixed revision.
    git(suite.path, "revert", "--no-edit", "HEAD")
    meta = _good_build_still_works(suite, cache)
    assert meta["cache_hit"] is False and meta["runtime_spec_version"] == 6


def test_no_runtime_matched_by_the_glob(suite: SuiteRepo, cache: Path):
    proc = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main",
                   "--cache", str(cache), "--runtime-glob", "target/release/wbuild/*/*.nothing")
    assert proc.returncode == 1
    line = _error_line(proc.stderr)
    assert "no runtime matched --runtime-glob 'target/release/wbuild/*/*.nothing'" in line
    # The hint lists what was built, so the user can fix the glob.
    assert "net_runtime.compact.compressed.wasm" in line
    assert artifact_dirs(cache) == []
    _good_build_still_works(suite, cache)


def test_without_dev_runtime_the_smoke_check_names_the_feature(suite: SuiteRepo, cache: Path):
    proc = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main",
                   "--cache", str(cache), "--features", "")
    assert proc.returncode == 1
    line = _error_line(proc.stderr)
    assert "smoke check failed" in line
    assert "dev-runtime feature is missing" in line and "--features dev-runtime" in line
    assert "net_testnet" in line
    assert artifact_dirs(cache) == []
    _good_build_still_works(suite, cache)


def test_bad_arguments_are_refused_before_any_work(suite: SuiteRepo, cache: Path):
    for args, needle in ((["--features", "a;b"], "--features"),
                         (["--runtime-glob", "/etc/*"], "--runtime-glob"),
                         (["--builder", "podman"], "--builder"),
                         (["--ref", "-rf"], "--ref")):
        base = ["node", "build", "--repo", str(suite.path), "--cache", str(cache)]
        if "--ref" not in args:
            base += ["--ref", "main"]
        proc = run_cli(*base, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in _error_line(proc.stderr)
    assert not (cache / "targets").exists()


def test_json_prints_the_manifest(suite: SuiteRepo, cache: Path):
    meta = _good_build_still_works(suite, cache)
    assert meta["kind"] == "node" and meta["cache_hit"] is False
    on_disk = json.loads((Path(meta["artifact_dir"]) / "manifest.json").read_text())
    extra = ("artifact_dir", "cache_hit", "requested_ref")
    assert {k: v for k, v in meta.items() if k not in extra} == on_disk
    assert meta["requested_ref"] == "main"
