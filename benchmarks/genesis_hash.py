"""Time ``ops-tools chainspec genesis-hash`` on a synthetic raw spec of N System.Account entries.

The keys have the real layout (twox128("System") ++ twox128("Account") ++ blake2_128_concat(id)),
the values are 80 bytes (an AccountInfo), plus a runtime blob in ``:code``. Each run is a fresh
process; wall time, CPU time (with the forked workers) and peak RSS are printed for state
versions 0 and 1, with the best of ``--runs`` and the load average (others' work on the machine
inflates wall time: the best run is the closest to an idle machine).

    python benchmarks/genesis_hash.py [--entries 1000000] [--runs 3] [--keep SPEC | --spec SPEC]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from ops_tools.chainspec.hashing import blake2_128_concat, storage_prefix
from ops_tools.chainspec.runtime import RuntimeVersion, api, build_runtime_blob


def synthetic_spec(entries: int) -> bytes:
    prefix = storage_prefix("System", "Account")
    runtime = RuntimeVersion("net-bench", "net-bench", 1, 6, 1, 1, 1, [api("Core", 5)])
    top = {
        "0x3a636f6465": "0x"
        + build_runtime_blob(runtime, extra_sections={"pad": bytes(1_000_000)}).hex()
    }
    for i in range(entries):
        account = i.to_bytes(32, "little")
        value = i.to_bytes(16, "little") * 5
        top["0x" + (prefix + blake2_128_concat(account)).hex()] = "0x" + value.hex()
    spec = {
        "name": "bench",
        "id": "bench",
        "chainType": "Local",
        "genesis": {"raw": {"top": top, "childrenDefault": {}}},
    }
    return orjson.dumps(spec)


def write_in_a_child(path: Path, entries: int) -> None:
    """Build the spec in a forked child, so that this process stays small.

    ``subprocess`` starts the command with vfork, and Linux counts the peak RSS of the address
    space the child had before exec (this process's) in the command's ``ru_maxrss``.
    """
    child = multiprocessing.get_context("fork").Process(
        target=lambda: path.write_bytes(synthetic_spec(entries))
    )
    child.start()
    child.join()
    if child.exitcode:
        raise SystemExit(f"building the synthetic spec failed (exit code {child.exitcode})")


def measure(spec: Path, state_version: int) -> tuple[float, float, float, str]:
    cmd = [
        sys.executable,
        "-m",
        "ops_tools.cli.main",
        "chainspec",
        "genesis-hash",
        str(spec),
        "--state-version",
        str(state_version),
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    out = proc.stdout.read().decode().strip() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"genesis-hash failed with exit status {proc.returncode}")
    # Linux counts the forked workers the command reaped in its CPU time; ru_maxrss (KiB) is
    # the largest single process among them.
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per state version; best kept")
    parser.add_argument("--keep", type=Path, help="write the synthetic spec here and keep it")
    parser.add_argument("--spec", type=Path, help="time this existing spec instead of building one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = args.spec or args.keep or Path(tmp) / "bench.raw.json"
        if args.spec is None:
            t = time.perf_counter()
            write_in_a_child(spec, args.entries)
            print(
                f"synthetic spec: {args.entries:,} entries, {spec.stat().st_size / 2**20:.0f} MiB,"
                f" built in {time.perf_counter() - t:.1f} s"
            )
        for version in (0, 1):
            runs = [measure(spec, version) for _ in range(args.runs)]
            elapsed, cpu, _, genesis = min(runs)
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"genesis-hash state_version={version}: best {elapsed:.2f} s wall of {args.runs}"
                f" (all: {', '.join(f'{r[0]:.2f}' for r in runs)}), {cpu:.2f} s CPU,"
                f" {max(r[2] for r in runs):.0f} MiB peak RSS, load average {load} ({genesis})"
            )


if __name__ == "__main__":
    main()
