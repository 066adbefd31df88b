"""Wall time of ``ops-tools localnet up`` from nothing, and of a second, no-change run, with
Ansible's default strategy and with mitogen's (when it loads with our ansible-core).

    python benchmarks/converge.py

Runs in a temporary NET_LOCALNET_DIR (ports of inventories/local must be free) and purges it.
"""

from __future__ import annotations

import json
import os
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


def mitogen_env() -> dict[str, str] | None:
    try:
        import ansible_mitogen  # type: ignore[import-not-found]
    except ImportError:
        return None
    plugins = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    return {"ANSIBLE_STRATEGY_PLUGINS": str(plugins), "ANSIBLE_STRATEGY": "mitogen_linear"}


def measure(label: str, extra: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory(prefix="converge-") as tmp:
        env = {**os.environ, **extra, "NET_LOCALNET_DIR": str(Path(tmp) / "localnet")}
        try:
            first, _ = timed(env, "localnet", "up", "--json")
            second, result = timed(env, "localnet", "up", "--json")
            print(
                f"{label}: localnet up from nothing {first:.1f} s;"
                f" second (no-change) run {second:.1f} s, changed={result.get('changed')}"
            )
        except RuntimeError as exc:
            print(f"{label}: failed: {exc}")
        finally:
            subprocess.run(
                [str(OPS_TOOLS), "localnet", "down", "--purge", "--yes"],
                env=env,
                cwd=ROOT,
                capture_output=True,
                check=False,
            )


def main() -> None:
    measure("default strategy (linear)", {})
    mitogen = mitogen_env()
    if mitogen is None:
        print("mitogen strategy: not measured (mitogen is not installed: pip install mitogen)")
    else:
        measure("mitogen_linear strategy", mitogen)


if __name__ == "__main__":
    main()
