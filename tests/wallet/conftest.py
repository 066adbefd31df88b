"""Fixtures of the wallet-cli suite: the CLI as a subprocess with a private keystore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

WALLET_CLI = Path(sys.executable).with_name("wallet-cli")
PASSPHRASE = "correct horse battery staple"


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


@dataclass
class Wallet:
    """Runs ``wallet-cli`` against ``keystore`` with the passphrase in the environment."""

    keystore: Path
    passphrase: str | None = PASSPHRASE

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NET_")}
        env["NET_KEYSTORE"] = str(self.keystore)
        if self.passphrase is not None:
            env["NET_WALLET_PASSPHRASE"] = self.passphrase
        env.update(extra or {})
        return env

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        # A hang guard, not a speed limit: the idle lane may wait long for a processor.
        timeout: float = 600,
    ) -> Result:
        proc = subprocess.run(
            [str(WALLET_CLI), *args],
            env=self.env(env),
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def snapshot(self) -> dict[str, bytes]:
        """Every file of the keystore with its bytes: to prove a failure wrote nothing."""
        if not self.keystore.exists():
            return {}
        return {p.name: p.read_bytes() for p in sorted(self.keystore.iterdir())}


def assert_clean_failure(result: Result, code: int, *needles: str) -> None:
    """Exit ``code``, one ``error:`` line holding every needle, and no traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1, result.stderr
    for needle in needles:
        assert needle in error_lines[0], (needle, error_lines[0])


@pytest.fixture
def wallet(tmp_path: Path) -> Wallet:
    return Wallet(tmp_path / "keystore")


@pytest.fixture(scope="module")
def made_account(tmp_path_factory: pytest.TempPathFactory) -> tuple[Wallet, dict]:
    """One account made by ``wallet-cli new --json``; scrypt is slow, so once per module."""
    w = Wallet(tmp_path_factory.mktemp("made") / "keystore")
    result = w.run("new", "op1", "--json")
    assert result.returncode == 0, result.stderr
    return w, result.json()
