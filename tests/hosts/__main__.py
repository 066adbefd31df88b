"""Test hosts for people: `python -m tests.hosts up --dir D NAME...` boots them and prints how
to reach each (`--json` for machines); `python -m tests.hosts down --dir D` stops them;
`python -m tests.hosts unpack --dir D NAME TARBALL` unpacks a tarball at / of one of them."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from tests.hosts.hosts import Fleet, TestHostError, boot_fleet, missing_tools, stop_fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.hosts", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="boot systemd test hosts")
    up.add_argument("--dir", type=Path, required=True, help="state directory of the fleet")
    up.add_argument("--json", action="store_true")
    up.add_argument("names", nargs="+", help="host names, one host each")
    down = sub.add_parser("down", help="stop the fleet recorded in --dir")
    down.add_argument("--dir", type=Path, required=True)
    unpack = sub.add_parser("unpack", help="unpack a tarball at / of a host of the fleet in --dir")
    unpack.add_argument("--dir", type=Path, required=True)
    unpack.add_argument("name", help="the host")
    unpack.add_argument("tarball", type=Path)
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
        elif args.command == "unpack":
            fleet = Fleet.load(args.dir)
            if args.name not in (names := [h.name for h in fleet.hosts]):
                print(f"error: no host {args.name!r} in the fleet of {args.dir} (its hosts:"
                      f" {', '.join(names)})", file=sys.stderr)
                return 2
            fleet.by_name(args.name).unpack(args.tarball)
        else:
            stop_fleet(args.dir)
    except TestHostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
