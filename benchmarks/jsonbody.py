"""Benchmark: what the platform's strict JSON check (``jsonbody.loads``, run by the middleware on
every JSON request body) costs, next to the readers the handlers use anyway (``orjson.loads``
in the gateway, ``json.loads`` in FastAPI), on the bodies the services see and on hostile ones.

Usage: .venv/bin/python benchmarks/jsonbody.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import time
from collections.abc import Callable

import orjson

from ops_tools.attestation.gpu import GpuProfile
from ops_tools.services.attestation.pki import MockPki
from ops_tools.services.attestation.report import IssueRequest, issue
from ops_tools.services.common import jsonbody


def per_call_us(fn: Callable[[], object], seconds: float) -> float:
    calls = 0
    started = time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        fn()
        calls += 1
    return elapsed / calls * 1e6


def bodies() -> dict[str, bytes]:
    chat = {"model": "tiny-echo", "max_tokens": 256, "stream": True, "messages": [
        {"role": "system", "content": "You are terse. " * 10},
        *({"role": "user" if i % 2 else "assistant", "content": f"turn {i}: " + "word " * 60}
          for i in range(10)),
    ]}
    report = issue(MockPki(os.urandom(32)), IssueRequest(
        "op", None, os.urandom(32), "0x" + "11" * 32, dt.datetime.now(dt.UTC),
        dt.timedelta(days=1), [GpuProfile()] * 8))
    return {
        "gateway chat request": json.dumps(chat).encode(),
        "attestation verify, 8-GPU report": json.dumps({"report": report}).encode(),
        "faucet drip": b'{"recipient": "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"}',
        "1 MiB of short strings": json.dumps(["ab"] * 200_000).encode(),
        "1 MiB, 500k brackets deep (refused)": b"[" * 500_000 + b"]" * 500_000,
        "1 MiB, 100 surrogate pairs among text": json.dumps(
            ["\U0001f600" * 1 + "x" * 10_000] * 100, ensure_ascii=True).encode(),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    print(f"{'body':40} {'bytes':>9} {'strict µs':>10} {'json µs':>9} {'orjson µs':>10}")
    for name, raw in bodies().items():
        def strict(raw: bytes = raw) -> None:
            with contextlib.suppress(jsonbody.JsonBodyError):
                jsonbody.loads(raw)

        def plain(raw: bytes = raw) -> None:
            with contextlib.suppress(ValueError, RecursionError):
                json.loads(raw)

        def fast(raw: bytes = raw) -> None:
            with contextlib.suppress(orjson.JSONDecodeError):
                orjson.loads(raw)

        print(f"{name:40} {len(raw):>9} {per_call_us(strict, args.seconds):>10.0f}"
              f" {per_call_us(plain, args.seconds):>9.0f} {per_call_us(fast, args.seconds):>10.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
