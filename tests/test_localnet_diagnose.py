"""How tests/localnet.py picks the logs that explain a failed ``localnet up``: the programs an
error names, by name, by name without the index, or by a loopback port their host's
configuration names; what it says when the network's supervisord was never configured; and the
lock going from the shared network to the next holder in the process without a gap."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from tests import localnet_lock
from tests.localnet import _tail, diagnose, named_in

PROGRAMS = ["net-node-authority-0", "net-node-rpc-0", "net-gateway-0", "net-worker-0",
            "net-faucet-0"]


def test_an_error_names_a_program_by_its_name_without_the_index(tmp_path: Path) -> None:
    error = "error: net-worker is not ready after 180 s"
    assert named_in(error, PROGRAMS, tmp_path) == {"net-worker-0"}
    assert named_in("net-node-rpc-0 exited", PROGRAMS, tmp_path) == {"net-node-rpc-0"}
    # A prefix of another name is not that name.
    assert named_in("net-node is slow", PROGRAMS, tmp_path) == set()


def test_a_port_in_the_error_names_the_hosts_configured_with_it(tmp_path: Path) -> None:
    (tmp_path / "gateway-0").mkdir()
    (tmp_path / "gateway-0" / "service.json").write_text('{"listen_port": 8005}')
    (tmp_path / "worker-0" / "etc").mkdir(parents=True)
    (tmp_path / "worker-0" / "etc" / "config.toml").write_text(
        'gateway_url = "http://127.0.0.1:8005"\n')
    (tmp_path / "faucet-0").mkdir()
    (tmp_path / "faucet-0" / "service.json").write_text('{"listen_port": 80051}')
    error = "HTTP 503 ConnectError: Connection refused (http://127.0.0.1:8005/v1/workers)"
    assert named_in(error, PROGRAMS, tmp_path) == {"net-gateway-0", "net-worker-0"}


def test_a_log_tail_is_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "net-gateway-0.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    tail = _tail(log).splitlines()
    assert tail[0] == "line 70" and tail[-1] == "line 99" and len(tail) == 30


def test_without_a_supervisord_conf_it_says_so(tmp_path: Path) -> None:
    assert "was never configured" in diagnose(tmp_path, "anything")


def _free(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_the_lock_goes_from_the_shared_network_to_the_next_holder_without_a_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    lock = tmp_path / "net-localnet.lock"
    monkeypatch.setattr(localnet_lock, "LOCK", lock)
    shared_fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(shared_fd, fcntl.LOCK_EX)
    stopped: list[bool] = []

    def hand_over() -> int:
        # What SharedNetwork does: the network is purged (here: noted), the descriptor handed on.
        localnet_lock.on_lock.remove(hand_over)
        stopped.append(_free(lock))
        return shared_fd

    localnet_lock.on_lock.append(hand_over)
    with localnet_lock.localnet_lock():
        assert stopped == [False]  # still held while the shared network went down
        assert not _free(lock)  # and held by the new holder
        assert not localnet_lock.on_lock
    assert _free(lock)  # given back at the end
    with pytest.raises(OSError):
        os.fstat(shared_fd)  # the handed-over descriptor was the one closed
