"""--builder docker: the container wiring (pure), and a real build where an engine answers."""

from __future__ import annotations

from pathlib import Path, PurePath

import pytest

from ops_tools.build.builder import BuildRequest, build, make_runner
from ops_tools.build.docker_builder import (
    CARGO_HOME,
    SRC,
    TARGET,
    DockerCargo,
    container_env,
    engine,
    host_path,
    volumes,
)
from ops_tools.build.env import build_env
from ops_tools.errors import OpsError
from tests.build.conftest import SuiteRepo, run_cli


def test_container_paths_are_fixed_so_remapping_does_not_depend_on_the_host(tmp_path: Path):
    paths = DockerCargo().paths(tmp_path / "wt", tmp_path / "targets" / "k", tmp_path / "ch")
    assert (paths.worktree, paths.target_dir, paths.cargo_home) == (SRC, TARGET, CARGO_HOME)
    env = container_env(build_env({"PATH": "/host/bin", "HOME": "/root", "SECRET_TOKEN": "x"},
                                  paths, 1700000000))
    assert "SECRET_TOKEN" not in env and "/host/bin" not in env["PATH"]
    assert env["CARGO_TARGET_DIR"] == str(TARGET) and env["SOURCE_DATE_EPOCH"] == "1700000000"
    assert f"--remap-path-prefix={SRC}=/build/pallet-suite" in env["CARGO_ENCODED_RUSTFLAGS"]
    assert str(tmp_path) not in env["CARGO_ENCODED_RUSTFLAGS"]


def test_volumes_mount_the_source_read_only(tmp_path: Path):
    vols = volumes(tmp_path / "wt", tmp_path / "t", tmp_path / "ch")
    assert vols[str(tmp_path / "wt")] == {"bind": str(SRC), "mode": "ro"}
    assert vols[str(tmp_path / "t")]["mode"] == "rw"
    exe = host_path(f"{TARGET}/release/net-node", tmp_path / "t")
    assert exe == tmp_path / "t/release/net-node"
    with pytest.raises(ValueError):
        host_path("/elsewhere/net-node", tmp_path / "t")


def test_runner_selection():
    assert make_runner("local").name == "local"
    assert make_runner("docker", "rust:pinned").image == "rust:pinned"  # type: ignore[attr-defined]
    assert PurePath(str(SRC)).is_absolute()


@pytest.fixture
def docker_engine() -> None:
    try:
        engine()
    except OpsError as exc:
        pytest.skip(f"no Docker engine on this machine, the docker builder cannot run: {exc}")


def test_docker_build_of_the_fixture(docker_engine: None, suite: SuiteRepo, cache: Path):
    result = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache, builder="docker"))
    m = result.artifact.manifest
    assert m["builder"] == "docker" and m["runtime_spec_version"] == 6
    again = build(BuildRequest(repo=str(suite.path), ref="main", cache=cache, builder="docker"))
    assert again.cache_hit and again.key == result.key


def test_docker_builder_without_an_engine_is_one_clear_error(suite: SuiteRepo, cache: Path):
    try:
        engine()
    except OpsError:
        pass
    else:
        pytest.skip("a Docker engine answers here; this test covers machines without one")
    proc = run_cli("node", "build", "--repo", str(suite.path), "--ref", "main",
                   "--cache", str(cache), "--builder", "docker")
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "no Docker engine answers" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (cache / "artifacts").exists()
