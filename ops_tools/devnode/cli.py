"""``devnode``: the command line of a Substrate node (clap's shape, built with argparse).

Sub-commands import what they need inside their functions, so that ``key`` and ``build-spec``
start fast: Ansible runs them many times per deploy.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ops_tools.devnode import NODE_VERSION
from ops_tools.devnode.config import ChainPaths, NodeConfig, default_base, parse_multiaddr
from ops_tools.errors import InputError, OpsError

log = logging.getLogger("devnode")


def _git_suffix() -> str:
    """The checkout's short commit, read from .git without running git; 'static' elsewhere."""
    git = Path(__file__).resolve().parents[2] / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            path = git / ref
            if path.is_file():
                head = path.read_text().strip()
            else:
                packed = (git / "packed-refs").read_text().splitlines()
                head = next(line.split()[0] for line in packed if line.endswith(" " + ref))
        return head[:7]
    except (OSError, StopIteration, IndexError):
        return "static"


def version_string() -> str:
    return f"{NODE_VERSION}-{_git_suffix()}"


def _add_chain(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument(
        "--chain", required=required, help="dev, local, or the path of a chain spec file"
    )


def _add_base(p: argparse.ArgumentParser) -> None:
    p.add_argument("-d", "--base-path", type=Path, help="base directory of the node's data")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="devnode",
        description="Development node of the NET test network "
        "(a stand-in for the pallet-suite's Substrate node).",
    )
    p.add_argument("--version", "-V", action="store_true", help="print the version and exit")
    _add_chain(p)
    _add_base(p)
    p.add_argument(
        "--dev", action="store_true", help="--chain dev --tmp --validator with //Alice's keys"
    )
    p.add_argument(
        "--tmp", action="store_true", help="run in a temporary base path, removed at exit"
    )
    p.add_argument("--name", help="the node's human-readable name")
    p.add_argument("--validator", action="store_true", help="author blocks and vote for finality")
    for who in ("alice", "bob", "charlie", "dave", "eve", "ferdie"):
        p.add_argument(
            f"--{who}", action="store_true", help=f"--validator with //{who.title()}'s keys"
        )
    p.add_argument("--rpc-port", type=int, default=9944)
    p.add_argument("--rpc-external", action="store_true", help="listen for RPC on all interfaces")
    p.add_argument(
        "--unsafe-rpc-external", action="store_true", help="--rpc-external --rpc-methods unsafe"
    )
    p.add_argument("--rpc-addr", help="listen for RPC on this address (default 127.0.0.1)")
    p.add_argument(
        "--rpc-methods", choices=("auto", "safe", "unsafe"), default="auto", type=str.lower
    )
    p.add_argument("--rpc-cors", help="comma-separated allowed origins, or 'all'")
    p.add_argument("--rpc-max-request-size", type=int, default=15, help="in MiB")
    p.add_argument("--port", type=int, help="p2p TCP port (default 30333) on 127.0.0.1")
    p.add_argument("--listen-addr", action="append", default=[], help="/ip4/<ip>/tcp/<port>")
    p.add_argument("--prometheus-port", type=int, default=9615)
    p.add_argument("--prometheus-external", action="store_true")
    p.add_argument("--no-prometheus", action="store_true")
    p.add_argument(
        "--node-key-file", type=Path, help="file with the ed25519 node key (hex or 32 raw bytes)"
    )
    p.add_argument("--unsafe-force-node-key-generation", action="store_true")
    p.add_argument("--bootnodes", nargs="+", action="extend", default=[], metavar="MULTIADDR")
    p.add_argument(
        "--finality-delay",
        type=int,
        metavar="MS",
        help="devnode only: how long after importing a block an authority votes for it"
        " (default: half a slot, at most 1000)",
    )
    p.add_argument("-l", "--log", default="info", help="log level (info, debug, warn)")
    # Accepted for command-line compatibility with a Substrate node; no effect here.
    for flag in (
        "--no-telemetry",
        "--no-mdns",
        "--no-hardware-benchmarks",
        "--discover-local",
        "--allow-private-ip",
        "--no-private-ip",
    ):
        p.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    for flag in (
        "--state-pruning",
        "--pruning",
        "--sync",
        "--wasm-execution",
        "--in-peers",
        "--out-peers",
        "--rpc-max-connections",
        "--db-cache",
        "--blocks-pruning",
        "--telemetry-url",
        "--public-addr",
        "--database",
    ):
        p.add_argument(flag, help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command")

    bs = sub.add_parser("build-spec", help="print the chain spec (plain, or raw with --raw)")
    _add_chain(bs)
    bs.add_argument("--dev", action="store_true")
    bs.add_argument("--raw", action="store_true")
    bs.add_argument("--disable-default-bootnode", action="store_true")

    pc = sub.add_parser("purge-chain", help="remove the chain's database (keys are kept)")
    _add_chain(pc)
    _add_base(pc)
    pc.add_argument("--dev", action="store_true")
    pc.add_argument("-y", action="store_true", help="do not ask for confirmation")

    key = sub.add_parser("key", help="key management")
    ksub = key.add_subparsers(dest="key_command", required=True)
    ins = ksub.add_parser(
        "insert", help="insert a key into the node's keystore (secret from --suri or stdin)"
    )
    _add_chain(ins)
    _add_base(ins)
    ins.add_argument("--dev", action="store_true")
    ins.add_argument(
        "--scheme", choices=("Sr25519", "Ed25519"), type=lambda s: s.capitalize(), default="Sr25519"
    )
    ins.add_argument("--key-type", required=True)
    ins.add_argument(
        "--suri", help="secret URI; omit it to read one line from stdin (keeps it out of ps)"
    )
    ins.add_argument("--keystore-path", type=Path)
    gen = ksub.add_parser("generate-node-key", help="generate an ed25519 node key")
    gen.add_argument(
        "--file", type=Path, help="write the secret here (hex; raw with --bin), print the peer id"
    )
    gen.add_argument("--bin", action="store_true")
    gen.add_argument("--chain", help=argparse.SUPPRESS)
    gen.add_argument("--base-path", type=Path, help=argparse.SUPPRESS)
    ins_nk = ksub.add_parser("inspect-node-key", help="print the peer id of a node key file")
    ins_nk.add_argument("--file", type=Path, required=True)
    ins_nk.add_argument("--bin", action="store_true", help=argparse.SUPPRESS)
    return p


def _chain_arg(args: argparse.Namespace) -> str:
    if getattr(args, "dev", False) and not args.chain:
        return "dev"
    if not args.chain:
        raise InputError("--chain is required: dev, local, or the path of a chain spec file")
    return args.chain


def _base(args: argparse.Namespace) -> Path:
    return args.base_path if args.base_path else default_base()


def cmd_build_spec(args: argparse.Namespace) -> None:
    from ops_tools.devnode.chain_spec import plain_to_raw, render, resolve_plain
    from ops_tools.devnode.node_key import generate, peer_id, public_of

    data, where = resolve_plain(_chain_arg(args))
    if not isinstance(data.get("genesis"), dict):
        raise InputError(f"{where}: field 'genesis' is missing or not an object")
    if args.raw and "raw" not in data["genesis"]:
        data = plain_to_raw(data, where)
    if not args.disable_default_bootnode and not data.get("bootNodes"):
        # As Substrate does: the building node's own (fresh, random) identity as a bootnode.
        data = dict(data)
        data["bootNodes"] = [f"/ip4/127.0.0.1/tcp/30333/p2p/{peer_id(public_of(generate()))}"]
    sys.stdout.write(render(data))


def cmd_purge(args: argparse.Namespace) -> None:
    from ops_tools.devnode.chain_spec import load_chain

    spec = load_chain(_chain_arg(args))
    db = ChainPaths(_base(args), spec.id).db
    if not db.exists():
        print(f"{db} did not exist.", file=sys.stderr)
        return
    if not args.y:
        sys.stderr.write(f'Are you sure to remove "{db}"? [y/N]: ')
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("Aborted", file=sys.stderr)
            return
    shutil.rmtree(db)
    print(f'"{db}" removed.', file=sys.stderr)


def cmd_key(args: argparse.Namespace) -> None:
    from ops_tools.devnode import node_key

    if args.key_command == "generate-node-key":
        secret = node_key.generate()
        pid = node_key.peer_id(node_key.public_of(secret))
        if args.file:
            node_key.write_key_file(args.file, secret, args.bin)
        elif args.bin:
            sys.stdout.buffer.write(secret)
        else:
            print(secret.hex())
        print(pid, file=sys.stderr)
        return
    if args.key_command == "inspect-node-key":
        print(node_key.peer_id(node_key.public_of(node_key.read_key_file(args.file))))
        return
    from ops_tools.devnode.chain_spec import load_chain
    from ops_tools.devnode.keystore import Keystore, check_key_type

    check_key_type(args.key_type)
    suri = args.suri
    if suri is None:
        suri = sys.stdin.readline().rstrip("\r\n")
        if not suri:
            raise InputError("no secret URI: pass --suri or write it as one line on stdin")
    path = args.keystore_path or ChainPaths(_base(args), load_chain(_chain_arg(args)).id).keystore
    Keystore(path).insert(args.key_type, suri, args.scheme)


def _node_secret(paths: ChainPaths, cfg: NodeConfig, chain_type: str) -> bytes:
    from ops_tools.atomic import write_bytes
    from ops_tools.devnode.node_key import generate, read_key_file

    if cfg.node_key_file is not None:
        return read_key_file(cfg.node_key_file)
    if paths.node_key.exists():
        return read_key_file(paths.node_key)
    if (
        cfg.validator
        and chain_type != "Development"
        and not cfg.tmp
        and not cfg.force_node_key_generation
    ):
        # Substrate >= 1.11: an authority must keep its network identity across restarts.
        raise OpsError(
            f"NetworkKeyNotFound: {paths.node_key} does not exist;"
            " a validator needs a persistent node key:"
            f" create one with 'devnode key generate-node-key --file {paths.node_key}' (or pass"
            " --node-key-file, or --unsafe-force-node-key-generation)"
        )
    secret = generate()
    write_bytes(paths.node_key, secret, mode=0o600)
    return secret


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger("devnode")
    root.handlers[:] = [handler]
    root.setLevel({"warn": "WARNING", "trace": "DEBUG"}.get(level.lower(), level.upper()))
    root.propagate = False


def cmd_run(args: argparse.Namespace) -> None:
    from ops_tools.devnode.chain_spec import load_chain
    from ops_tools.devnode.keystore import Keystore
    from ops_tools.devnode.node import Node

    _setup_logging(args.log)
    dev_key = next(
        (w for w in ("alice", "bob", "charlie", "dave", "eve", "ferdie") if getattr(args, w)), None
    )
    if args.dev:
        args.tmp = args.validator = True
        dev_key = dev_key or "alice"
    if dev_key:
        args.validator = True
    spec = load_chain(_chain_arg(args))
    tmp_dir = None
    if args.tmp:
        tmp_dir = Path(tempfile.mkdtemp(prefix="devnode-"))
        base = tmp_dir
    else:
        base = _base(args)
    try:
        _run(args, spec, base, dev_key, Keystore, Node)
    finally:
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)


def _run(
    args: argparse.Namespace,
    spec: Any,
    base: Path,
    dev_key: str | None,
    keystore_cls: Any,
    node_cls: Any,
) -> None:
    from ops_tools.devnode.node_key import peer_id, public_of

    paths = ChainPaths(base, spec.id)
    rpc_host = args.rpc_addr or (
        "0.0.0.0" if args.rpc_external or args.unsafe_rpc_external else "127.0.0.1"  # noqa: S104
    )
    p2p_host, p2p_port = "127.0.0.1", args.port if args.port is not None else 30333
    if args.listen_addr:
        p2p_host, p2p_port, _ = parse_multiaddr(args.listen_addr[0], "--listen-addr")
    for b in args.bootnodes:
        parse_multiaddr(b, "--bootnodes")
    if args.finality_delay is not None and not 0 < args.finality_delay <= 60_000:
        raise InputError(
            f"--finality-delay {args.finality_delay}: expected milliseconds from 1 to 60000"
            " (finality never happens in the instant of the import)"
        )
    cors = (
        None
        if args.rpc_cors == "all" or (args.dev and not args.rpc_cors)
        else (
            [o.strip() for o in args.rpc_cors.split(",")]
            if args.rpc_cors
            else [
                "http://localhost",
                "http://127.0.0.1",
                "https://localhost",
                "https://127.0.0.1",
                "https://polkadot.js.org",
            ]
        )
    )
    cfg = NodeConfig(
        chain=spec.id,
        base_path=base,
        name=args.name or f"devnode-{os.getpid()}",
        validator=args.validator,
        rpc_host=rpc_host,
        rpc_port=args.rpc_port,
        rpc_methods="unsafe" if args.unsafe_rpc_external else args.rpc_methods,
        rpc_cors=cors,
        rpc_max_request=args.rpc_max_request_size * 1024 * 1024,
        p2p_host=p2p_host,
        p2p_port=p2p_port,
        prometheus_host="0.0.0.0" if args.prometheus_external else "127.0.0.1",  # noqa: S104
        prometheus_port=None if args.no_prometheus else args.prometheus_port,
        node_key_file=args.node_key_file,
        bootnodes=list(args.bootnodes) + spec.boot_nodes,
        force_node_key_generation=args.unsafe_force_node_key_generation,
        tmp=args.tmp,
        finality_delay_ms=args.finality_delay,
    )
    keystore = keystore_cls(paths.keystore)
    if dev_key:
        keystore.insert("aura", f"//{dev_key.title()}", "Sr25519")
        keystore.insert("gran", f"//{dev_key.title()}", "Ed25519")
    if cfg.validator:
        from ops_tools.devnode.runtime.state import State, read_config

        authorities = read_config(State(spec.storage)).aura_authorities
        if not any(keystore.has("aura", a) for a in authorities):
            raise OpsError(
                f"--validator: the keystore {paths.keystore} holds no aura key"
                " of this chain's authorities;"
                " insert one with 'devnode key insert --key-type aura --scheme Sr25519 ...'"
            )
    secret = _node_secret(paths, cfg, spec.chain_type)
    rt = spec.runtime
    log.info("Development Node (devnode, a stand-in for the pallet-suite's Substrate node)")
    log.info("✌️  version %s", version_string())
    log.info("📋 Chain specification: %s", spec.name)
    log.info("🏷  Node name: %s", cfg.name)
    log.info("👤 Role: %s", "AUTHORITY" if cfg.validator else "FULL")
    log.info("💾 Database: SQLite at %s", paths.db)
    log.info(
        "⛓  Native runtime: %s-%d (%s-%d.tx%d.au%d)",
        rt.spec_name,
        rt.spec_version,
        rt.impl_name,
        rt.impl_version,
        rt.transaction_version,
        rt.authoring_version,
    )
    log.info(
        "🔨 Initializing Genesis block/state (state: 0x%s, header-hash: 0x%s)",
        spec.genesis.state_root.hex(),
        spec.genesis.genesis_hash.hex(),
    )
    log.info("🏷  Local node identity is: %s", peer_id(public_of(secret)))

    async def main() -> None:
        node = node_cls(cfg, spec, paths, secret, version_string())
        await node.run()

    asyncio.run(main())


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    try:
        if args.version:
            from ops_tools.devnode.runtime.blob import VERSION

            print(f"devnode {version_string()} (spec {VERSION.spec_name} {VERSION.spec_version})")
            return
        if args.command == "build-spec":
            cmd_build_spec(args)
        elif args.command == "purge-chain":
            cmd_purge(args)
        elif args.command == "key":
            cmd_key(args)
        else:
            cmd_run(args)
    except OpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except OSError as exc:
        # e.g. a base path or keystore that is not writable: one line, no traceback.
        where = f"{exc.filename}: " if exc.filename else ""
        print(
            f"error: {where}{exc.strerror or exc}; check the path and its permissions",
            file=sys.stderr,
        )
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
