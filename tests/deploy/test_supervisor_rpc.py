"""ops_tools/deploy/supervisor_rpc.py against a real supervisord (Debian's) on a unix socket in
a temporary directory, laid out as a local network's state so localnet's down() is asked too:
status and pid, a stop then a start, a restart of a running and of a stopped program, a stop of
everything with one program already stopped, and the errors when nothing (or nothing that
answers) is on the socket."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops_tools.deploy import localnet
from ops_tools.deploy.supervisor_rpc import (
    BAD_NAME,
    Supervisor,
    SupervisorFault,
    SupervisorUnreachable,
    socket_path,
)

pytestmark = pytest.mark.process  # supervisord and two programs

PROGRAMS = ("alpha", "beta")


def write_conf(root: Path, sock: Path) -> Path:
    sup = root / "supervisor"
    sup.mkdir(parents=True, exist_ok=True)
    conf = sup / "supervisord.conf"
    programs = "".join(
        f"[program:{p}]\ncommand=sleep 600\nstartsecs=0\nstopwaitsecs=5\nautostart=true\n"
        f"stdout_logfile={sup}/{p}.log\nredirect_stderr=true\n" for p in PROGRAMS)
    conf.write_text(
        f"[unix_http_server]\nfile={sock}\nchmod=0700\n"
        f"[supervisord]\nlogfile={sup}/supervisord.log\npidfile={sup}/supervisord.pid\n"
        f"childlogdir={sup}\n"
        "[rpcinterface:supervisor]\n"
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n"
        f"[supervisorctl]\nserverurl=unix://{sock}\n" + programs)
    return conf


@contextlib.contextmanager
def supervisord(root: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    """supervisord in the foreground (-n), its programs running: its pid is this child's,
    stopped by it at the end."""
    conf = write_conf(root, root / "s.sock")
    proc = subprocess.Popen(["/usr/bin/supervisord", "-n", "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sup = Supervisor(conf, timeout=5)
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(SupervisorUnreachable):
                if all(p.statename == "RUNNING" for p in sup.processes()):
                    break
            assert proc.poll() is None, f"supervisord exited {proc.returncode}"
            assert time.monotonic() < deadline, "supervisord did not start its programs"
            time.sleep(0.1)
        yield conf, proc
    finally:
        proc.terminate()  # supervisord stops its programs, then exits
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    with supervisord(tmp_path_factory.mktemp("sup")) as (conf, proc):
        yield conf, proc.pid


@pytest.fixture
def sup(daemon: tuple[Path, int]) -> Supervisor:
    """The daemon's supervisord with every program running, whatever the last test left."""
    client = Supervisor(daemon[0], timeout=5)
    for program in PROGRAMS:
        client.start(program)
    return client


def states(sup: Supervisor) -> dict[str, str]:
    return {p.namespec: p.statename for p in sup.processes()}


def test_the_socket_is_the_one_of_the_configuration(daemon: tuple[Path, int]) -> None:
    conf, _ = daemon
    assert socket_path(conf) == conf.parents[1] / "s.sock"


def test_status_and_pid(sup: Supervisor, daemon: tuple[Path, int]) -> None:
    assert sup.pid() == daemon[1]
    infos = {p.name: p for p in sup.processes()}
    assert set(infos) == set(PROGRAMS)
    alpha = infos["alpha"]
    assert (alpha.group, alpha.namespec, alpha.statename) == ("alpha", "alpha", "RUNNING")
    assert alpha.pid > 0 and alpha.description.startswith(f"pid {alpha.pid}")
    assert sup.process("beta").pid == infos["beta"].pid


def test_an_unknown_program_is_a_fault_naming_it(sup: Supervisor) -> None:
    with pytest.raises(SupervisorFault) as caught:
        sup.process("gamma")
    assert caught.value.code == BAD_NAME and "gamma" in str(caught.value)


def test_stop_then_start(sup: Supervisor) -> None:
    before = sup.process("alpha").pid
    assert sup.stop("alpha") is True
    assert states(sup) == {"alpha": "STOPPED", "beta": "RUNNING"}
    assert sup.stop("alpha") is False  # not running: nothing to do, no error
    assert sup.start("alpha") is True
    after = sup.process("alpha")
    assert after.statename == "RUNNING" and after.pid not in (0, before)
    assert sup.start("alpha") is False  # already started


def test_restart_of_a_running_and_of_a_stopped_program(sup: Supervisor) -> None:
    before = sup.process("alpha").pid
    sup.restart("alpha")
    after = sup.process("alpha")
    assert after.statename == "RUNNING" and after.pid not in (0, before)
    sup.stop("alpha")
    sup.restart("alpha")  # not running: started, no error
    again = sup.process("alpha")
    assert again.statename == "RUNNING" and again.pid not in (0, after.pid)


def test_stop_all_with_one_already_stopped_succeeds(sup: Supervisor) -> None:
    sup.stop("beta")
    assert sup.stop_all() == []
    assert states(sup) == {"alpha": "STOPPED", "beta": "STOPPED"}


def test_localnet_sees_the_programs_and_down_stops_them(
        sup: Supervisor, daemon: tuple[Path, int], monkeypatch: pytest.MonkeyPatch) -> None:
    state = daemon[0].parents[1]
    monkeypatch.setenv("NET_LOCALNET_DIR", str(state))
    assert localnet._supervisor_running(state) and localnet._all_programs_running(state)
    sup.stop("alpha")
    assert not localnet._all_programs_running(state)
    assert localnet.down() == f"stopped the local network; data kept in {state}"
    assert set(states(sup).values()) == {"STOPPED"}
    assert localnet._supervisor_running(state)  # down stops the programs, not supervisord


def test_purge_shuts_supervisord_down_and_deletes_the_state(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path_factory.mktemp("purge")
    with supervisord(state) as (_, proc):
        # Reaped as soon as it exits: purge waits for its pid to be gone, and a zombie child of
        # this process would still be there.
        threading.Thread(target=proc.wait, daemon=True).start()
        monkeypatch.setenv("NET_LOCALNET_DIR", str(state))
        assert localnet.purge() == f"purged {state}"
        assert proc.poll() is not None and not state.exists()


def test_no_socket_says_where_and_what_to_do(tmp_path: Path) -> None:
    sock = tmp_path / "s.sock"
    conf = write_conf(tmp_path, sock)
    with pytest.raises(SupervisorUnreachable) as caught:
        Supervisor(conf, timeout=5).processes()
    message = str(caught.value)
    assert f"no socket at {sock}" in message
    assert f"start it with: supervisord -c {conf}" in message
    assert not localnet._supervisor_running(tmp_path)
    assert not localnet._all_programs_running(tmp_path)


def test_a_stale_socket_is_not_running(tmp_path: Path) -> None:
    sock = tmp_path / "s.sock"
    conf = write_conf(tmp_path, sock)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stale:
        stale.bind(str(sock))  # bound, never listening: what a killed supervisord leaves
        with pytest.raises(SupervisorUnreachable, match=r"nothing listens on .*s\.sock"):
            Supervisor(conf, timeout=5).pid()


def test_a_silent_socket_times_out(tmp_path: Path) -> None:
    sock = tmp_path / "s.sock"
    conf = write_conf(tmp_path, sock)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(sock))
        silent.listen(1)  # connects, never answers
        begun = time.monotonic()
        with pytest.raises(SupervisorUnreachable, match=r"did not answer getPID within 0\.5 s"):
            Supervisor(conf, timeout=0.5).pid()
        assert time.monotonic() - begun < 5
