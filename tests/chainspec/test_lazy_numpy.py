"""numpy is loaded only by the large-genesis paths, never by importing the package or the node.

The development node and every CLI command import ``ops_tools.chainspec``; numpy alone would add
about 0.15 s to each start. Checked in a fresh interpreter, since this one has loaded it already.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.chainspec.test_vectors import PUBLISHED


def _loads_numpy(code: str, *args: str) -> bool:
    probe = f"{code}\nimport sys\nprint('numpy' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.process
@pytest.mark.parametrize(
    "module",
    [
        "ops_tools.chainspec",
        "ops_tools.chainspec.genesis",
        "ops_tools.chainspec.trie",
        "ops_tools.chainspec.spec",
        "ops_tools.devnode.cli",
        "ops_tools.devnode.runtime.executive",
        "ops_tools.cli.main",
    ],
)
def test_importing_does_not_load_numpy(module):
    assert not _loads_numpy(f"import {module}")


@pytest.mark.process
def test_the_fast_path_does_load_it():
    # The probe can tell: a map of a few thousand same-length keys takes the numpy builder.
    code = (
        "from ops_tools.chainspec.trie import trie_root\n"
        "trie_root({i.to_bytes(4, 'big'): b'v' * 40 for i in range(5000)}, 1)"
    )
    assert _loads_numpy(code)


@pytest.mark.process  # a fresh interpreter tells whether numpy was imported
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_real_specs_are_hashed_without_numpy(vectors_dir: Path, name: str):
    code = (
        "import sys\n"
        "from ops_tools.chainspec.genesis import genesis_of_file\n"
        "print('0x' + genesis_of_file(sys.argv[1]).genesis_hash.hex())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code + "\nprint('numpy' in sys.modules)", str(vectors_dir / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [PUBLISHED[name][0], "False"]
