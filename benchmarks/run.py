"""Run every benchmark of the suite, one after the other, and print their figures.

python benchmarks/run.py [NAME ...]     (names: genesis_hash metadata_decode devnode_rpc
                                         devnode_sync converge reset_cycle faucet faucet_shared
                                         indexer hung_node)

Two more run only by name, as they take minutes of both cores or a container: fresh_up (make up
on a fresh machine) and llama_wheel (the llama-cpp-python build of scripts/bootstrap).
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = [
    "genesis_hash", "metadata_decode", "devnode_rpc", "devnode_sync", "converge", "reset_cycle",
    "faucet", "faucet_shared", "indexer", "hung_node",
]


def main() -> int:
    names = sys.argv[1:] or ORDER
    print(
        f"machine: {platform.node()} {platform.machine()}, {platform.python_implementation()}"
        f" {platform.python_version()}, {__import__('os').cpu_count()} cores"
    )
    failed = 0
    for name in names:
        script = HERE / f"{name}.py"
        if not script.exists():
            print(f"== {name}: no such benchmark")
            failed += 1
            continue
        print(f"== {name}", flush=True)
        failed += subprocess.run([sys.executable, str(script)], check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
