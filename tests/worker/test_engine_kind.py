"""``engine_kind`` from the onboarding command to the worker's settings, and its refusals."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ops_tools.errors import InputError
from ops_tools.operator import units
from ops_tools.operator.context import Options
from ops_tools.worker import config

OPS_TOOLS = Path(sys.executable).with_name("ops-tools")


def test_the_onboarding_config_carries_the_engine_kind_to_the_worker(tmp_path):
    opts = Options(name="op1", state_dir=tmp_path / "state", keystore_dir=tmp_path / "ks",
                   passphrase_file=None, rpc_url="ws://127.0.0.1:9",
                   faucet_url="http://127.0.0.1:9", attestation_url="http://127.0.0.1:9",
                   gateway_url="http://127.0.0.1:9", engine_url="http://127.0.0.1:8000",
                   engine_kind="sglang")
    path = tmp_path / "worker.yml"
    path.write_text(units.worker_config(opts, "0x" + "ab" * 32, tmp_path / "pp"))
    settings = config.load(path, {})
    assert (settings.engine_kind, settings.engine_url) == ("sglang", "http://127.0.0.1:8000")


def test_the_kind_defaults_from_the_url(tmp_path):
    suri = {"dev_suri_file": tmp_path / "suri"}
    assert config.WorkerSettings(**suri).engine_kind == "test"
    assert config.WorkerSettings(engine_url="http://127.0.0.1:1", **suri).engine_kind == "openai"


@pytest.mark.parametrize(("overrides", "named"), [
    ({"engine_kind": "tgi", "engine_url": "http://127.0.0.1:1"}, "'tgi' is not one of"),
    ({"engine_kind": "vllm"}, "engine_kind 'vllm' with engine_url 'test'"),
    ({"engine_kind": "test", "engine_url": "http://127.0.0.1:1"}, "engine_kind 'test' with"),
    ({"extra_engines": [{"kind": "openai", "url": "file:///etc/passwd"}]}, "not an http(s) URL"),
])
def test_a_wrong_engine_is_refused_naming_the_field_and_value(tmp_path, overrides, named):
    with pytest.raises(InputError) as caught:
        config.load(None, {"dev_suri_file": tmp_path / "suri", **overrides})
    assert named in str(caught.value)


@pytest.mark.process
def test_onboard_refuses_an_unknown_engine_kind_before_doing_anything(tmp_path):
    proc = subprocess.run(
        [str(OPS_TOOLS), "operator", "onboard", "--name", "op1", "--engine-url",
         "http://127.0.0.1:1", "--engine-kind", "tgi", "--state-dir", str(tmp_path / "s"),
         "--yes"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert "--engine-kind: 'tgi'" in proc.stderr + proc.stdout
    assert not (tmp_path / "s").exists()


def test_a_model_file_that_is_not_a_readable_gguf_is_refused_naming_the_field(tmp_path):
    """engine_model_path: the worker counts usage with this file's tokenizer."""
    suri = {"dev_suri_file": tmp_path / "suri", "engine_kind": "llamacpp",
            "engine_url": "http://127.0.0.1:1"}
    (tmp_path / "not.gguf").write_bytes(b"<html>")
    (tmp_path / "model.gguf").write_bytes(b"GGUF" + bytes(60))
    for path, named in [(tmp_path / "missing.gguf", "no such file"),
                        (tmp_path, "a directory"),
                        (tmp_path / "not.gguf", "not a GGUF file")]:
        with pytest.raises(InputError) as caught:
            config.load(None, {**suri, "engine_model_path": str(path)})
        assert f"engine_model_path: {str(path)!r}" in str(caught.value)
        assert named in str(caught.value)
    with pytest.raises(InputError, match="only the llamacpp dialect"):
        config.load(None, {**suri, "engine_kind": "vllm",
                           "engine_model_path": str(tmp_path / "model.gguf")})
