"""The platform's pure parts: settings, secrets, client addresses, salted hashes."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pytest

from ops_tools.errors import InputError
from ops_tools.secrets import read_secret
from ops_tools.services.common.clientip import client_ip
from ops_tools.services.common.hashing import salted_hash
from ops_tools.services.common.secrets import secret_from
from ops_tools.services.common.settings import ServiceSettings, SettingsError, load_settings


class DemoSettings(ServiceSettings):
    service_name = "demo"
    secret_fields = frozenset({"api_token"})
    drip: int = 5
    api_token: str | None = None


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "demo.yml"
    p.write_text(text)
    return p


def test_yaml_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = write(tmp_path, "listen_port: 8001\nstate_dir: /srv/demo\ndrip: 3\n")
    s = load_settings(DemoSettings, cfg)
    assert (s.drip, s.listen_host) == (3, "127.0.0.1")
    assert s.effective_database_url() == "sqlite:////srv/demo/demo.db"
    monkeypatch.setenv("NET_DEMO_DRIP", "9")
    assert load_settings(DemoSettings, cfg).drip == 9


@pytest.mark.parametrize(("text", "needles"), [
    ("listen_port: 0\nstate_dir: /x\n", ["listen_port", "0", "greater than or equal to 1"]),
    ("listen_port: 1\nstate_dir: /x\nfoo: 1\n", ["foo", "unknown key", "drip"]),
    ("state_dir: /x\n", ["listen_port", "missing", "NET_DEMO_LISTEN_PORT"]),
    ("listen_port: 1\nstate_dir: /x\ngenesis_hash: 0x12\n", ["genesis_hash", "64 hex digits"]),
    ("listen_port: 1\nstate_dir: /x\ntrusted_proxies: [nope]\n",
     ["trusted_proxies.0", "'nope'", "IP network"]),
    ("listen_port: 1\nstate_dir: /x\nlisten_host: example.org\n", ["listen_host", "IP address"]),
    ("listen_port: 1\nstate_dir: /x\ndatabase_url: mysql://x/y\n", ["database_url", "sqlite"]),
    ("- a\n", ["expected a mapping"]),
    ("a: [\n", ["not valid YAML"]),
])
def test_bad_config_is_one_line(tmp_path: Path, text: str, needles: list[str]) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings(DemoSettings, write(tmp_path, text))
    message = str(err.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_bad_environment_value_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NET_DEMO_DRIP", "lots")
    with pytest.raises(SettingsError, match="environment NET_DEMO_DRIP: drip: 'lots'"):
        load_settings(DemoSettings, write(tmp_path, "listen_port: 1\nstate_dir: /x\n"))


def test_secret_values_are_not_echoed(tmp_path: Path) -> None:
    cfg = write(tmp_path, "listen_port: 1\nstate_dir: /x\napi_token: [hunter2-secret]\n")
    with pytest.raises(SettingsError) as err:
        load_settings(DemoSettings, cfg)
    assert "hunter2" not in str(err.value) and "<hidden>" in str(err.value)


def test_secret_files_must_be_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "seed"
    f.write_text("correct horse battery\n")
    os.chmod(f, 0o644)
    with pytest.raises(InputError) as err:
        read_secret(f, key="seed_file")
    assert "chmod 600" in str(err.value) and "correct horse" not in str(err.value)
    os.chmod(f, 0o600)
    assert read_secret(f) == "correct horse battery"
    with pytest.raises(InputError, match="cannot read it"):
        read_secret(tmp_path / "absent")
    monkeypatch.setenv("NET_DEMO_SEED", "from-env")
    assert secret_from(None, "NET_DEMO_SEED", key="seed") == "from-env"
    monkeypatch.delenv("NET_DEMO_SEED")
    with pytest.raises(InputError, match="NET_DEMO_SEED"):
        secret_from(None, "NET_DEMO_SEED", key="seed")


NETS = [ipaddress.ip_network("127.0.0.2/32"), ipaddress.ip_network("10.8.0.0/16")]


@pytest.mark.parametrize(("peer", "xff", "expected"), [
    ("198.51.100.7", ["203.0.113.9"], "198.51.100.7"),          # untrusted peer: header ignored
    ("127.0.0.2", ["203.0.113.9"], "203.0.113.9"),              # one trusted proxy
    ("127.0.0.2", ["6.6.6.6, 203.0.113.9"], "203.0.113.9"),     # spoofed entry on the left
    ("127.0.0.2", ["6.6.6.6", "203.0.113.9, 10.8.1.1"], "203.0.113.9"),  # two proxies
    ("127.0.0.2", [], "127.0.0.2"),                              # no header
    ("127.0.0.2", ["garbage"], "127.0.0.2"),                     # nothing usable appended
    ("127.0.0.2", ["10.8.0.5"], "10.8.0.5"),                     # only proxies: the last one
])
def test_client_ip(peer: str, xff: list[str], expected: str) -> None:
    assert client_ip(peer, xff, NETS) == expected


def test_salted_hashes_compare_under_one_salt_and_hide_the_value() -> None:
    first = b"s" * 32
    assert salted_hash(first, "a") == salted_hash(first, "a") != salted_hash(b"x" * 32, "a")
    assert "5Grw" not in salted_hash(first, "5GrwvaEF")
