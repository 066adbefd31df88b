"""Processor time per test, for the work on CI's length (docs/benchmarks.md): set
``NET_CPU_PROFILE=FILE`` (tests/conftest.py loads this plugin then). Every test appends one
JSON line to FILE: its worker, wall time, the worker's own CPU seconds and those of the
children it reaped meanwhile (``getrusage``). The run ends with the modules that cost most.

A child is counted when it is reaped, which may be in a later test of the same worker (a
fixture's server, say): read the figures per module or per worker, not per test. Daemons that
leave their parent (supervisord's programs, containers) are not counted at all; process
accounting (``accton``, ``sa``) sees those."""

from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

OUT = Path(os.environ["NET_CPU_PROFILE"])


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    start, (own, kids) = time.monotonic(), _cpu()
    yield
    own_after, kids_after = _cpu()
    record = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
              "wall_s": round(time.monotonic() - start, 3), "cpu_s": round(own_after - own, 3),
              "children_cpu_s": round(kids_after - kids, 3)}
    with OUT.open("a") as out:  # one short line per write: workers' lines do not interleave
        out.write(json.dumps(record) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") or not OUT.exists():
        return
    per_module: Counter[str] = Counter()
    for line in OUT.read_text().splitlines():
        record = json.loads(line)
        per_module[record["test"].split("::")[0]] += record["cpu_s"] + record["children_cpu_s"]
    terminalreporter.write_sep("-", f"processor time per module ({OUT}, all runs in it)")
    for module, seconds in per_module.most_common(15):
        terminalreporter.write_line(f"{seconds:8.1f} s  {module}")
    terminalreporter.write_line(f"{sum(per_module.values()):8.1f} s  in all")
