"""One render in a process of its own, for the determinism check (which starts two, in
environments that differ): ``python -m ops_tools.chainspec.render_worker REQUEST.json``, where
the request names the network, node, runtime, revision, provenance and output directory. The
library's own entry point, so the check never goes through the ``ops-tools`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ops_tools.chainspec.render import render
from ops_tools.errors import OpsError


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m ops_tools.chainspec.render_worker REQUEST.json", file=sys.stderr)
        return 2
    try:
        request = json.loads(Path(args[0]).read_text())
        runtime = request.get("runtime")
        rendered = render(
            Path(request["network"]),
            Path(request["node"]),
            Path(runtime) if runtime else None,
            pallet_suite_revision=request.get("revision"),
            artifact=request.get("artifact"),
        )
        rendered.write(Path(request["out"]))
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
