"""Wall and processor time of the llama-cpp-python wheel as scripts/bootstrap builds it on a
fresh machine (PyPI ships only its source; CI's machine has no pip cache): ``pip wheel
--no-cache-dir`` with scripts/llama-cpp-python.cmake as the build's project include.

    python benchmarks/llama_wheel.py [--include FILE] [--runs N]

--include builds with another CMake include instead (an older revision of the file, say), to
compare. The processor time is that of pip and everything it started (the compilers included).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def requirement() -> str:
    """llama-cpp-python's pin in the llamacpp extra, without its extras."""
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["llamacpp"]
    pin = next(r for r in extra if r.startswith("llama-cpp-python"))
    return re.sub(r"\[.*?\]", "", pin)


def build(include: Path, out: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-cache-dir", "--no-deps",
         requirement(), "-w", str(out)],
        env={**os.environ, "CMAKE_ARGS": f"-DCMAKE_PROJECT_INCLUDE={include}"},
        capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"pip wheel failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--include", type=Path, default=ROOT / "scripts" / "llama-cpp-python.cmake")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    if not args.include.is_file():
        sys.exit(f"--include {args.include}: no such file; give a CMake file to include")
    print(f"{requirement()}, include {args.include}")
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="llama-wheel-") as out:
            wall, cpu = build(args.include.resolve(), Path(out))
        print(f"  run {run}: {wall:6.1f} s wall, {cpu:6.1f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
