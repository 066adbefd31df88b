"""The interactive passphrase prompt, on a real pseudo-terminal (no environment, no file)."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import time

import pytest

from .conftest import WALLET_CLI, Wallet

pytestmark = pytest.mark.process  # starts processes (tests/process_lane.py)


def run_on_tty(
    wallet: Wallet, args: list[str], answers: list[str], timeout: float = 60
) -> tuple[int, str]:
    """Run wallet-cli with a pty as its controlling terminal; answer each prompt in turn.

    An answer is written only after its prompt appeared: getpass flushes pending input
    (TCSAFLUSH) when it starts, so an early answer would be lost.
    """
    env = wallet.env()
    env.pop("NET_WALLET_PASSPHRASE", None)
    pid, fd = pty.fork()
    if pid == 0:  # child: the pty is stdin/stdout/stderr and the controlling terminal
        os.execve(str(WALLET_CLI), [str(WALLET_CLI), *args], env)  # noqa: S606
    output = b""
    answered = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if answered < len(answers) and output.count(b"passphrase: ") > answered:
                os.write(fd, answers[answered].encode() + b"\n")
                answered += 1
        else:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


def test_new_asks_twice_and_never_echoes(tmp_path):
    w = Wallet(tmp_path / "ks", passphrase=None)
    code, out = run_on_tty(w, ["new", "ttyacct"], ["tty secret", "tty secret"])
    assert code == 0, out
    assert "Keystore passphrase:" in out and "Repeat passphrase:" in out
    assert "tty secret" not in out
    assert "created account 'ttyacct'" in out
    # The passphrase typed on the terminal unlocks the key.
    from substrateinterface import Keypair

    doc = (tmp_path / "ks" / "ttyacct.sr25519.json").read_text()
    assert Keypair.create_from_encrypted_json(doc, "tty secret").ss58_address in out


def test_mismatched_entries_write_nothing(tmp_path):
    w = Wallet(tmp_path / "ks", passphrase=None)
    code, out = run_on_tty(w, ["new", "ttyacct"], ["one", "two"])
    assert code == 2, out
    assert "error: passphrase: the two entries differ" in out
    assert w.snapshot() == {}
