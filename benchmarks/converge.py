"""Wall time of ``ops-tools localnet up`` from nothing, and of no-change runs after it, with
Ansible's own strategy (``--strategy ansible``: ansible.cfg's free) and with mitogen's
(``--strategy mitogen``, the default of ops-tools): each no-change run once as is (inputs
unchanged: no playbook run) and once with ``--converge`` (the playbook, which changes nothing).

    python benchmarks/converge.py [--repeat N] [--strategy mitogen|ansible]

Runs in a temporary NET_LOCALNET_DIR (ports of inventories/local must be free) and purges it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OPS_TOOLS = Path(sys.executable).with_name("ops-tools")
ROOT = Path(__file__).resolve().parent.parent


def timed(env: dict[str, str], *args: str) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(
        [str(OPS_TOOLS), *args], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "failed")
    return elapsed, json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}


def measure(strategy: str, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="converge-") as tmp:
        env = {**os.environ, "NET_LOCALNET_DIR": str(Path(tmp) / "localnet")}
        up = ("localnet", "up", "--json", "--strategy", strategy)
        try:
            first, _ = timed(env, *up)
            runs: dict[str, list[float]] = {"no-change": [], "no-change --converge": []}
            for _ in range(repeat):
                for kind, extra in (("no-change", ()), ("no-change --converge", ("--converge",))):
                    elapsed, result = timed(env, *up, *extra)
                    if result.get("changed") != 0:
                        raise RuntimeError(f"a {kind} run changed {result.get('changed')} thing(s)")
                    runs[kind].append(elapsed)
            print(f"{strategy}: localnet up from nothing {first:.1f} s; " + "; ".join(
                f"{kind} run median {statistics.median(t):.1f} s, best {min(t):.1f} s"
                for kind, t in runs.items()
            ) + f" ({repeat} runs each, changed=0), load average {os.getloadavg()[0]:.1f}")
        except RuntimeError as exc:
            print(f"{strategy}: failed: {exc}")
        finally:
            subprocess.run(
                [str(OPS_TOOLS), "localnet", "down", "--purge", "--yes"],
                env=env,
                cwd=ROOT,
                capture_output=True,
                check=False,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="no-change runs per strategy")
    parser.add_argument("--strategy", choices=("mitogen", "ansible"), action="append",
                        help="measure only this strategy (repeatable; default: both)")
    args = parser.parse_args()
    for strategy in args.strategy or ("mitogen", "ansible"):
        measure(strategy, args.repeat)


if __name__ == "__main__":
    main()
