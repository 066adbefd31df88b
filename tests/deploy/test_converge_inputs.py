"""The digest that lets a no-change ``localnet up`` skip its playbook (converge_inputs.py): every
input moves it, and the record of the last converge is read back only when it is whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ops_tools.deploy import converge_inputs
from ops_tools.deploy.converge_inputs import inputs_digest, record, recorded

EXTRA = {"net_chainspec_dir": "/x/chainspec", "node_binary_sha256": "ab" * 32}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    files = {"ansible.cfg": "[defaults]\n", "playbooks/site.yml": "---\n",
             "roles/node/tasks/main.yml": "---\n", "inventories/local/hosts.yml": "all:\n",
             "ops_tools/deploy/x.py": "X = 1\n", "inventories/prod/hosts.yml": "all:\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "spec").mkdir()
    (root / "spec" / "raw.json").write_text("{}")
    return root


def digest(root: Path, env: dict[str, str] | None = None, extra: dict | None = None) -> str:
    return inputs_digest(extra or EXTRA, root / "spec", env or {"NET_X": "1"}, root)


def test_the_same_inputs_give_the_same_digest(project: Path) -> None:
    assert digest(project) == digest(project)


@pytest.mark.parametrize("rel", ["ansible.cfg", "playbooks/site.yml", "roles/node/tasks/main.yml",
                                 "inventories/local/hosts.yml", "ops_tools/deploy/x.py",
                                 "spec/raw.json"])
def test_any_input_file_edited_moves_it(project: Path, rel: str) -> None:
    before = digest(project)
    (project / rel).write_text((project / rel).read_text() + "# edited\n")
    assert digest(project) != before


def test_a_new_file_in_a_role_moves_it(project: Path) -> None:
    before = digest(project)
    (project / "roles/node/templates").mkdir()
    (project / "roles/node/templates/unit.j2").write_text("")
    assert digest(project) != before


def test_extra_vars_and_the_environment_move_it_but_not_what_ansible_never_reads(
    project: Path,
) -> None:
    before = digest(project)
    assert digest(project, extra={**EXTRA, "node_binary_sha256": "cd" * 32}) != before
    assert digest(project, env={"NET_X": "2"}) != before
    assert digest(project, env={"NET_X": "1", "ANSIBLE_FORKS": "3"}) != before
    assert digest(project, env={"NET_X": "1", "HOME": "/elsewhere"}) == before
    (project / "inventories/prod/hosts.yml").write_text("other: {}\n")
    shutil.rmtree(project / "ops_tools" / "deploy" / "__pycache__", ignore_errors=True)
    (project / "ops_tools/deploy/__pycache__").mkdir()
    (project / "ops_tools/deploy/__pycache__/x.cpython-311.pyc").write_bytes(b"\0")
    assert digest(project) == before


def test_the_record_is_read_back_only_when_whole(tmp_path: Path) -> None:
    assert recorded(tmp_path) is None
    record(tmp_path, "d" * 64, ["auth-0", "rpc-0"])
    assert recorded(tmp_path) == {"digest": "d" * 64, "hosts": ["auth-0", "rpc-0"]}
    for broken in ("", "{", "[]", '{"digest": 1, "hosts": []}', '{"digest": "d"}'):
        (tmp_path / converge_inputs.STAMP_NAME).write_text(broken)
        assert recorded(tmp_path) is None, broken
    converge_inputs.forget(tmp_path)
    assert not (tmp_path / converge_inputs.STAMP_NAME).exists()
