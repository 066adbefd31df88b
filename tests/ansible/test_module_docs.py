"""Every module of the collection documents itself: ``ansible-doc`` renders it, and its
DOCUMENTATION states the options its argument spec takes (name, type, default, required,
choices), as ansible-test's validate-modules would check (it needs a network to set up its own
virtualenv; this runs offline)."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import pytest
import yaml

from tests.ansible.conftest import ROOT, VENV_BIN, run, tail

MODULES = sorted(p.stem for p in (ROOT / "plugins" / "modules").glob("*.py")
                 if p.stem != "__init__")
COLLECTIONS = ROOT / "collections"


class _Spec(Exception):
    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__("argument spec captured")
        self.kwargs = kwargs


class _Capture:
    """Stands in for AnsibleModule: the module's main() hands it the spec and stops there."""

    def __init__(self, **kwargs: Any) -> None:
        raise _Spec(kwargs)


def argument_spec(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.syspath_prepend(str(COLLECTIONS))
    module = importlib.import_module(f"ansible_collections.net.ops.plugins.modules.{name}")
    monkeypatch.setattr(module, "AnsibleModule", _Capture)
    with pytest.raises(_Spec) as captured:
        module.main()
    return captured.value.kwargs["argument_spec"]


def documented(name: str) -> dict[str, Any]:
    module = sys.modules.get(f"ansible_collections.net.ops.plugins.modules.{name}")
    text = module.DOCUMENTATION if module else ""
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict), f"{name}: DOCUMENTATION is not a mapping"
    return doc


@pytest.mark.parametrize("name", MODULES)
def test_documentation_states_the_argument_spec(name: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec = argument_spec(name, monkeypatch)
    doc = documented(name)
    assert doc["module"] == name
    assert doc.get("short_description") and doc.get("author")
    options = doc.get("options") or {}
    assert sorted(options) == sorted(spec), f"{name}: documented options differ from the spec"
    for option, want in spec.items():
        have = options[option]
        assert have.get("description"), f"{name}: {option} has no description"
        for key, absent in (("type", "str"), ("required", False), ("choices", None),
                            ("elements", None)):
            assert have.get(key, absent) == want.get(key, absent), (name, option, key)
        if not want.get("required"):
            assert have.get("default") == want.get("default"), (name, option, "default")


@pytest.mark.process  # ansible-doc is a process (tests/process_lane.py)
def test_ansible_doc_renders_every_module() -> None:
    proc = run([str(VENV_BIN / "ansible-doc"), "-t", "module", "--json",
                *(f"net.ops.{name}" for name in MODULES)], timeout=300)
    assert proc.returncode == 0 and "[WARNING]" not in proc.stderr, tail(proc)
    rendered = json.loads(proc.stdout)
    assert sorted(rendered) == [f"net.ops.{name}" for name in MODULES]
    for name, doc in rendered.items():
        assert doc["doc"]["options"] and doc["return"] is not None, name
    text = run([str(VENV_BIN / "ansible-doc"), "-t", "module", "net.ops.net_service_converge"])
    assert text.returncode == 0, tail(text)
    assert "records the program" in " ".join(text.stdout.split())

