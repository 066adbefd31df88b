"""``run_playbook`` running real playbooks on this machine (local connection): what the
collection's events callback tells it (each task's start, failures, the converge module's
deferred restarts, the recap), a cancel that stops the run, and ansible-playbook's own error when
no task ran."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from ops_tools.deploy.runner import PlaybookFailed, run_playbook

pytestmark = pytest.mark.process  # runs ansible-playbook (tests/process_lane.py)


def _files(tmp_path: Path, tasks: list[dict]) -> tuple[Path, Path]:
    inventory = tmp_path / "hosts.yml"
    box = {"ansible_connection": "local",
           "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"box-0": box}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Play", "hosts": "all", "gather_facts": False,
                                         "tasks": tasks}]))
    return playbook, inventory


def test_tasks_changes_and_deferred_restarts_are_read_from_the_events(tmp_path: Path) -> None:
    marker = tmp_path / "made"
    playbook, inventory = _files(tmp_path, [
        {"name": "Make a file", "ansible.builtin.copy": {"dest": str(marker), "content": "x"}},
        {"name": "Hand back a deferred restart",
         "ansible.builtin.debug": {"var": "pending_start"},
         "vars": {"pending_start": {"name": "net-x", "digest": "{{ given }}"}}},
        {"name": "Fail, ignored", "ansible.builtin.command": "false", "ignore_errors": True},
    ])
    seen: list[str] = []
    result = run_playbook(playbook, inventory, {"given": "abc"}, on_task=seen.append,
                          strategy="ansible")
    assert result.ok and result.rc == 0
    assert seen == ["Make a file", "Hand back a deferred restart", "Fail, ignored"]
    assert result.changed == 2  # the copy and the ignored command
    assert result.hosts == ["box-0"]
    assert result.pending_starts == {"box-0": [{"name": "net-x", "digest": "abc"}]}
    assert result.failures == []  # an ignored failure is not one


def test_a_failed_task_is_named_with_its_host_and_message(tmp_path: Path) -> None:
    playbook, inventory = _files(tmp_path, [
        {"name": "Refuse", "ansible.builtin.fail": {"msg": "the spec is not the reviewed one"}}])
    with pytest.raises(PlaybookFailed, match=r"box-0: Refuse: the spec is not the reviewed one"):
        run_playbook(playbook, inventory, strategy="ansible")


def test_a_failed_loop_names_its_first_failed_item_not_the_loops_summary(tmp_path: Path) -> None:
    playbook, inventory = _files(tmp_path, [
        {"name": "Check each", "ansible.builtin.assert": {
            "that": ["item != 'b'"], "fail_msg": "{{ item }} is not allowed"},
         "loop": ["a", "b", "c"]}])
    with pytest.raises(PlaybookFailed) as caught:
        run_playbook(playbook, inventory, strategy="ansible")
    assert "box-0: Check each: item 'b': b is not allowed" in str(caught.value)
    assert "items failed" not in str(caught.value)


def test_a_failed_loop_item_is_named_by_its_label_and_no_log_hides_it(tmp_path: Path) -> None:
    """A role that keeps a secret item out of the output (loop_control.label, or no_log) keeps it
    out of ops-tools' error too."""
    items = [{"name": "key-a", "secret": "s3cret-a"}, {"name": "key-b", "secret": "s3cret-b"}]
    check = {"that": ["item.name != 'key-b'"], "fail_msg": "{{ item.name }} is refused"}
    playbook, inventory = _files(tmp_path, [
        {"name": "Labelled", "ansible.builtin.assert": check, "loop": items,
         "loop_control": {"label": "{{ item.name }}"}}])
    with pytest.raises(PlaybookFailed) as caught:
        run_playbook(playbook, inventory, strategy="ansible")
    assert "box-0: Labelled: item 'key-b': key-b is refused" in str(caught.value)
    assert "s3cret" not in str(caught.value)
    playbook, inventory = _files(tmp_path, [
        {"name": "Hidden", "ansible.builtin.assert": check, "loop": items, "no_log": True}])
    with pytest.raises(PlaybookFailed, match=r"box-0: Hidden: .*no_log") as caught:
        run_playbook(playbook, inventory, strategy="ansible")
    assert "s3cret" not in str(caught.value) and "key-b" not in str(caught.value)


def test_an_unreachable_host_is_said_to_be_unreachable(tmp_path: Path) -> None:
    playbook, inventory = _files(tmp_path, [{"name": "Ping", "ansible.builtin.ping": {}}])
    with socket.socket() as closed:  # a loopback port that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    box = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": port,
           "ansible_user": "nobody", "ansible_ssh_common_args": "-o ConnectTimeout=5"}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"box-0": box}}}))
    with pytest.raises(PlaybookFailed, match=r"box-0: Ping: unreachable: .*port"):
        run_playbook(playbook, inventory, strategy="ansible")


def test_a_playbook_that_does_not_parse_fails_with_ansibles_own_words(tmp_path: Path) -> None:
    playbook, inventory = _files(tmp_path, [])
    playbook.write_text("- hosts: all\n  tasks:\n    - ansible.builtin.debug: {msg: [unclosed\n")
    with pytest.raises(PlaybookFailed, match=r"play\.yml failed: ansible-playbook exit status"
                                             r" \d+: .*(YAML|yaml|Syntax|syntax)"):
        run_playbook(playbook, inventory, strategy="ansible")


def test_ansibles_dsa_deprecation_is_quieted_and_the_callers_warning_filters_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter that keeps cryptography's DSA deprecation (ansible-core imports DSA as it
    starts) out of every run's standard error comes after the caller's own, which stay."""
    monkeypatch.setenv("PYTHONWARNINGS", "error::ResourceWarning")
    playbook, inventory = _files(tmp_path, [
        {"name": "Show", "ansible.builtin.fail": {
            "msg": "filters={{ lookup('ansible.builtin.env', 'PYTHONWARNINGS') }}"}}])
    with pytest.raises(PlaybookFailed, match=r"filters=error::ResourceWarning,ignore:DSA is"
                                             r" deprecated$"):
        run_playbook(playbook, inventory, strategy="ansible")


def test_a_cancel_stops_the_run(tmp_path: Path) -> None:
    playbook, inventory = _files(tmp_path, [
        {"name": "Wait", "ansible.builtin.command": "sleep 300"}])
    cancel = threading.Event()
    threading.Timer(3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(PlaybookFailed):
        run_playbook(playbook, inventory, strategy="ansible", cancel=cancel)
    assert time.monotonic() - started < 120, "the run went on after the cancel"


def test_the_variables_are_not_on_the_command_line(tmp_path: Path) -> None:
    """ps shows a command line: the extra variables (a seed may be one) go in a 0600 file."""
    playbook, inventory = _files(tmp_path, [
        {"name": "Show my command line", "ansible.builtin.command": "cat /proc/{{ pid }}/cmdline",
         "vars": {"pid": "{{ lookup('ansible.builtin.pipe', 'echo $PPID') }}"},
         "register": "line"},
        {"name": "Hand it back", "ansible.builtin.debug": {"var": "pending_start"},
         "vars": {"pending_start": {"cmdline": "{{ line.stdout }}"}}}])
    result = run_playbook(playbook, inventory, {"secret": "s3cr3t-seed"}, strategy="ansible")
    cmdline = result.pending_starts["box-0"][0]["cmdline"]
    assert "ansible-playbook" in cmdline
    assert "s3cr3t-seed" not in cmdline
