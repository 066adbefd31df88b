"""Test hosts for people: `python -m tests.hosts up --dir D NAME...` boots them and prints how
to reach each (`--json` for machines); `python -m tests.hosts down --dir D` stops them."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from tests.hosts.hosts import TestHostError, boot_fleet, missing_tools, stop_fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hosts", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot systemd test hosts")
    up.add_argument("--dir", type=Path, required=True, help="state directory of the fleet")
    up.add_argument("--json", action="store_true")
    up.add_argument("names", nargs="+", help="host names, one host each")
    down = sub.add_parser("down", help="stop the fleet recorded in --dir")
    down.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            if missing := missing_tools():
                print(f"error: missing for test hosts: {', '.join(missing)}; run"
                      " scripts/bootstrap as root", file=sys.stderr)
                return 2
            fleet = boot_fleet(args.names, args.dir)
            if args.json:
                print(json.dumps(asdict(fleet), indent=1))
            else:
                for h in fleet.hosts:
                    print(f"{h.name}: ssh {' '.join(h.ssh_options())} {h.user}@{h.address}")
        else:
            stop_fleet(args.dir)
    except TestHostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
