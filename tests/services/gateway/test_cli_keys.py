"""``ops-tools gateway keys create|list|revoke`` against a running gateway's database."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from ops_tools.services.gateway.store import hash_key

from .harness import BIN

pytestmark = pytest.mark.timeout(120)
ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def ops(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ops-tools"), "gateway", "keys", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_create_list_revoke(gateway, worker):
    cfg = ("--config", str(gateway.config))
    created = ops("create", "--account", ALICE, "--budget", "123456789", "--rpm", "5", "--json",
                  *cfg)
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    headers = {"Authorization": f"Bearer {key}"}
    assert httpx.get(gateway.url + "/v1/models", headers=headers).status_code == 200
    listed = ops("list", "--json", *cfg)
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    row = rows[json.loads(created.stdout)["id"]]
    assert (row["account"], row["budget"], row["rpm"]) == (ALICE, 123456789, 5)
    # Stored hashed: neither the list nor the database file holds the key itself.
    assert key not in listed.stdout and hash_key(key) not in listed.stdout
    assert row["key_prefix"] + "…" in ops("list", *cfg).stdout
    revoked = ops("revoke", str(row["id"]), *cfg)
    assert revoked.returncode == 0, revoked.stderr
    denied = httpx.post(gateway.url + "/v1/embeddings", headers=headers,
                        json={"model": "net-test-embed", "input": "x"})
    assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
    again = ops("revoke", str(row["id"]), *cfg)
    assert again.returncode == 2 and "not an active key" in again.stderr


@pytest.mark.parametrize(("args", "field"), [
    (("--account", "not-an-address"), "--account"),
    (("--account", ALICE, "--budget", "0"), "--budget"),
    (("--account", ALICE, "--rpm", "-1"), "--rpm"),
])
def test_bad_input_is_one_line(gateway, args, field):
    result = ops("create", *args, "--config", str(gateway.config))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}")
