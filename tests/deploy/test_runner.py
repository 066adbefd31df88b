"""Choosing the Ansible strategy of ``run_playbook`` (pure: no playbook runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops_tools.deploy.runner import strategy_env
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
