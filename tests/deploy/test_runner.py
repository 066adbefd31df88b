"""Choosing the Ansible strategy of ``run_playbook`` and reporting its failures (pure: no
playbook runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops_tools.deploy.runner import failure_detail, strategy_env
from ops_tools.errors import InputError


def test_mitogen_is_the_default_and_points_at_its_plugins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NET_ANSIBLE_STRATEGY", raising=False)
    env = strategy_env(None)
    assert env["ANSIBLE_STRATEGY"] == "mitogen_free"
    assert (Path(env["ANSIBLE_STRATEGY_PLUGINS"]) / "mitogen_free.py").is_file()


def test_ansible_leaves_the_choice_to_ansible_cfg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NET_ANSIBLE_STRATEGY", "mitogen")
    assert strategy_env("ansible") == {}


def test_the_environment_chooses_when_no_option_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NET_ANSIBLE_STRATEGY", "ansible")
    assert strategy_env(None) == {}


def test_an_unknown_strategy_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NET_ANSIBLE_STRATEGY", "turbo")
    with pytest.raises(InputError, match=r"'turbo'.*mitogen, ansible.*NET_ANSIBLE_STRATEGY"):
        strategy_env(None)


def test_every_failed_host_is_reported_not_only_the_first() -> None:
    # The worker times out waiting on the gateway; the gateway's own failure says why.
    failures = ["worker-0: Converge: not ready after 180 s", "gateway-0: Converge: exited 2"]
    detail = failure_detail(failures, 2)
    assert detail.splitlines() == failures


def test_a_storm_of_failures_is_bounded_and_counted() -> None:
    detail = failure_detail([f"host-{i}: failed" for i in range(12)], 2)
    assert detail.splitlines()[:5] == [f"host-{i}: failed" for i in range(5)]
    assert detail.splitlines()[5:] == ["(and 7 more)"]


def test_a_run_without_a_failed_task_gives_the_exit_status() -> None:
    assert failure_detail([], 4) == "ansible-playbook exit status 4"
