"""``molecule`` for the suite's scenarios, with its executor check made once per run.

Molecule 26 runs ``ansible-playbook --version`` before every playbook it runs, to check that the
executor is installed: a whole Ansible start (about 1 CPU-s here, twice that on a loaded CI
machine) before each of a scenario's five to seven playbooks, about a hundred in a CI run. Here
the first check of each executor runs as molecule runs it and its success is remembered for the
rest of this process; a failing check still fails the way molecule fails it. Nothing else of
molecule changes.

Run by path (``python tests/ansible/molecule_cli.py test -s default``), from a role's directory,
as ``molecule`` is: it imports only molecule.
"""

from __future__ import annotations

import sys
from typing import Any

from molecule.__main__ import main
from molecule.provisioner.ansible_playbook import AnsiblePlaybook

_checked: set[str] = set()
_validate_backend = AnsiblePlaybook._validate_backend


def _validate_once(self: Any, backend: str) -> None:
    if backend not in _checked:
        _validate_backend(self, backend)  # raises when the executor is missing
        _checked.add(backend)


if __name__ == "__main__":
    AnsiblePlaybook._validate_backend = _validate_once  # type: ignore[method-assign]
    sys.argv[0] = "molecule"
    sys.exit(main())
