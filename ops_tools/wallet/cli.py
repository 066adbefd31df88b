"""``wallet-cli``: thin Typer front end; the logic lives in the sibling modules."""

from __future__ import annotations

import getpass
import json
import sys
import time
from pathlib import Path
from typing import Any

import typer
from substrateinterface.exceptions import SubstrateRequestException

from ops_tools import __version__
from ops_tools.chain.wire.heartbeat import sign_heartbeat
from ops_tools.errors import InputError, OpsError
from ops_tools.wallet import attest as attestation
from ops_tools.wallet import faucet_client, inputs, mnemonic_keys, operator, passphrase, rpc
from ops_tools.wallet.errors import ChainRejection
from ops_tools.wallet.keystore import AccountInfo, Keystore, default_keystore_dir
from ops_tools.wallet.tokens import describe_amount, format_tokens

app = typer.Typer(
    name="wallet-cli",
    help=(
        "Operator accounts of the NET test network: create, fund-check, register, heartbeat."
        " Keystore: $NET_KEYSTORE (default ~/.local/share/net/wallet)."
        " RPC: --rpc-url > $NET_RPC_URL > ws://127.0.0.1:9944."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

NameArg = typer.Argument(..., help="Account name in the keystore.", metavar="NAME")
JsonOpt = typer.Option(False, "--json", help="Print one JSON object on stdout.")
RpcOpt = typer.Option(
    None, "--rpc-url", help="Node RPC URL (overrides $NET_RPC_URL; default ws://127.0.0.1:9944)."
)
TimeoutOpt = typer.Option(
    rpc.DEFAULT_TIMEOUT_S, "--timeout", min=1.0, help="Seconds to wait for any one RPC answer."
)
PassFileOpt = typer.Option(
    None,
    "--passphrase-file",
    help="Read the keystore passphrase from FILE (one trailing newline is dropped)."
    " Else $NET_WALLET_PASSPHRASE, else a prompt.",
    metavar="FILE",
)
MnemonicFileOpt = typer.Option(
    None,
    "--mnemonic-file",
    help="Read the mnemonic from FILE ('-' for standard input). Else a hidden prompt.",
    metavar="FILE",
)


def _emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    sys.stdout.flush()


def _warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def _keystore() -> Keystore:
    return Keystore(default_keystore_dir())


def _passphrase(passphrase_file: Path | None, *, confirm: bool) -> str:
    if passphrase_file is not None and passphrase.file_is_shared(passphrase_file):
        _warn(f"{passphrase_file} is readable by group or others; chmod 600 it")
    return passphrase.resolve_passphrase(passphrase_file, confirm=confirm)


def _print_account(info: AccountInfo) -> None:
    typer.echo(f"name:         {info.name}")
    typer.echo(f"ss58 address: {info.ss58_address}")
    typer.echo(f"eth address:  {info.eth_address}")


def _read_mnemonic(mnemonic_file: Path | None) -> str:
    if mnemonic_file is None:
        if not sys.stdin.isatty():
            raise InputError(
                "mnemonic: none given and no terminal to ask on; pass --mnemonic-file FILE"
                " (or - for standard input)"
            )
        return getpass.getpass("Mnemonic (input hidden): ")
    if str(mnemonic_file) == "-":
        return sys.stdin.read()
    try:
        return mnemonic_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"--mnemonic-file: cannot read {str(mnemonic_file)!r} ({exc}); give a readable text"
            " file holding the words"
        ) from exc


def _create(name: str, mnemonic: str, passphrase_file: Path | None) -> AccountInfo:
    keys = mnemonic_keys.keys_from_mnemonic(mnemonic)
    pw = _passphrase(passphrase_file, confirm=True)
    return _keystore().create(name, keys, pw)


def _precheck_new_name(name: str) -> Keystore:
    inputs.account_name(name)
    store = _keystore()
    if store.exists(name):
        raise InputError(
            f"account name: {name!r} already exists in {store.root}; choose another name"
            " (nothing was written)"
        )
    return store


@app.command("new")
def new(
    name: str = NameArg,
    words: int = typer.Option(12, "--words", help="Mnemonic length: 12, 15, 18, 21 or 24 words."),
    passphrase_file: Path | None = PassFileOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Create an account: a new mnemonic, its sr25519 hotkey and EVM key, encrypted on disk.

    The mnemonic is printed once, on stdout, and never stored: write it down.
    """
    _precheck_new_name(name)
    mnemonic = mnemonic_keys.generate_mnemonic(words)
    info = _create(name, mnemonic, passphrase_file)
    if json_out:
        _emit_json({**info.to_json(), "mnemonic": mnemonic})
        return
    typer.echo(f"created account {name!r} in {info.sr25519_path.parent}")
    _print_account(info)
    typer.echo(f"keystore:     {info.sr25519_path} (polkadot-js JSON)")
    typer.echo(f"              {info.eth_path} (Ethereum keystore v3)")
    typer.echo("")
    typer.echo("mnemonic (shown this once, not stored; it is the only backup of both keys):")
    typer.echo(f"  {mnemonic}")


@app.command("import")
def import_(
    name: str = NameArg,
    mnemonic_file: Path | None = MnemonicFileOpt,
    passphrase_file: Path | None = PassFileOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Create an account from an existing BIP39 mnemonic (same keys as when it was new)."""
    _precheck_new_name(name)
    info = _create(name, _read_mnemonic(mnemonic_file), passphrase_file)
    if json_out:
        _emit_json(info.to_json())
        return
    typer.echo(f"imported account {name!r} into {info.sr25519_path.parent}")
    _print_account(info)


@app.command("address")
def address(name: str = NameArg, json_out: bool = JsonOpt) -> None:
    """Print the ss58 (prefix 42) and the checksummed eth address of NAME. No passphrase needed."""
    info = _keystore().info(name)
    if json_out:
        _emit_json(info.to_json())
        return
    typer.echo(f"ss58: {info.ss58_address}")
    typer.echo(f"eth:  {info.eth_address}")


@app.command("list")
def list_(json_out: bool = JsonOpt) -> None:
    """List the accounts of the keystore with their addresses."""
    store = _keystore()
    rows: list[dict[str, Any]] = []
    for name in store.names():
        try:
            rows.append(store.info(name).to_json())
        except OpsError as exc:
            rows.append({"name": name, "error": exc.message})
    if json_out:
        _emit_json({"keystore": str(store.root), "accounts": rows})
        return
    if not rows:
        typer.echo(f"no accounts in {store.root}", err=True)
        return
    for row in rows:
        if "error" in row:
            typer.echo(f"{row['name']}  (broken: {row['error']})")
        else:
            typer.echo(f"{row['name']}  {row['ss58_address']}  {row['eth_address']}")


@app.command("balance")
def balance(
    name: str = NameArg,
    rpc_url: str | None = RpcOpt,
    timeout: float = TimeoutOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Print free, reserved and frozen balance of NAME (System.Account) in tokens and plancks."""
    info = _keystore().info(name)
    url = rpc.resolve_rpc_url(rpc_url)
    substrate = rpc.connect(url, timeout)
    with rpc.rpc_errors(url, timeout):
        bal = operator.read_balance(substrate, info.ss58_address)
    if json_out:
        _emit_json({"name": name, **bal.to_json()})
        return
    typer.echo(f"account:  {name} {bal.address}")
    # Align the decimal points so the three amounts read as a column.
    whole = max(len(format_tokens(v).split(".")[0]) for _, v in bal.amounts())
    for label, value in bal.amounts():
        tokens = format_tokens(value)
        pad = " " * (whole - len(tokens.split(".")[0]))
        typer.echo(f"{label + ':':<9} {pad}{tokens} {bal.symbol} ({value} plancks)")


@app.command("fund")
def fund(
    name: str = NameArg,
    faucet_url: str | None = typer.Option(
        None,
        "--faucet-url",
        help="Faucet URL (overrides $NET_FAUCET_URL; default http://127.0.0.1:8001).",
    ),
    timeout: float = typer.Option(
        120.0, "--timeout", min=1.0, help="Seconds to wait for the faucet's answer."
    ),
    json_out: bool = JsonOpt,
) -> None:
    """Ask the network's faucet for a drip to NAME (the second onboarding step). No passphrase."""
    info = _keystore().info(name)
    url = faucet_client.resolve_faucet_url(faucet_url)
    result = faucet_client.request_drip(url, info.ss58_address, timeout)
    if json_out:
        _emit_json({"name": name, **result})
        return
    amount = result.get("amount", {})
    typer.echo(f"funded {name} {result.get('recipient')}: {amount.get('tokens')}"
               f" {amount.get('symbol', '')} ({amount.get('plancks')} plancks)".replace("  ", " "))
    typer.echo(f"extrinsic: {result.get('extrinsic_hash')}")
    typer.echo(f"block:     #{result.get('block_number')} {result.get('block_hash')}")
    typer.echo(f"genesis:   {result.get('genesis_hash')}")
    if result.get("next_drip_at"):
        typer.echo(f"next drip: {result['next_drip_at']}")
    typer.echo(f"next: wallet-cli balance {name}")


def _report(sub: operator.Submission, json_out: bool, symbol: str) -> None:
    if json_out:
        _emit_json(sub.to_json())
    else:
        state = "included" if sub.success else "included but FAILED"
        typer.echo(f"{sub.call} by {sub.signer}: {state}")
        typer.echo(f"extrinsic: {sub.extrinsic_hash}")
        typer.echo(f"block:     #{sub.block_number} {sub.block_hash}")
        if sub.fee is not None:
            typer.echo(f"fee:       {describe_amount(sub.fee, symbol)}")
        typer.echo("events:")
        for ev in sub.events:
            attrs = json.dumps(ev["attributes"], sort_keys=True, default=str)
            typer.echo(f"  {ev['pallet']}.{ev['event']} {attrs}")
    if not sub.success:
        raise OpsError(f"{sub.error_pallet}.{sub.error_name}: {sub.remedy}")


def _unlock(name: str, passphrase_file: Path | None) -> tuple[AccountInfo, Any]:
    store = _keystore()
    info = store.info(name)
    return info, store.unlock_hotkey(name, _passphrase(passphrase_file, confirm=False))


def _submit(json_out: bool, action: Any) -> operator.Submission:
    try:
        return action()
    except ChainRejection as exc:
        if json_out:
            _emit_json(exc.details)
        raise


@app.command("attest")
def attest(
    name: str = NameArg,
    attestation_url: str | None = typer.Option(
        None, "--attestation-url",
        help="Attestation service URL (overrides $NET_ATTESTATION_URL;"
        f" default {attestation.DEFAULT_ATTESTATION_URL}).",
    ),
    timeout: float = TimeoutOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Ask the attestation service for a report for NAME and print its hash.

    The report is for operator id NAME and NAME's ss58 account, with a fresh nonce; its hash is
    what register-operator takes as --attestation-hash. No passphrase needed.
    """
    info = _keystore().info(name)
    url = attestation.resolve_url(attestation_url)
    result = attestation.request_report(url, name, info.ss58_address, timeout)
    if json_out:
        _emit_json(result.to_json())
        return
    typer.echo(result.hash)
    typer.echo(f"report: {result.to_json()['report_url']} (mock quote, expires"
               f" {result.report['expires_at']})", err=True)
    typer.echo(f"next: wallet-cli register-operator {name} --stake <plancks>"
               f" --attestation-hash {result.hash}", err=True)


@app.command("register-operator")
def register_operator(
    name: str = NameArg,
    stake: str = typer.Option(
        ..., "--stake", help="Stake in plancks (1 token = 10^12 plancks; '_' separators allowed)."
    ),
    attestation_hash: str = typer.Option(
        inputs.ZERO_HASH,
        "--attestation-hash",
        help="H256 of the attestation report, 0x + 64 hex digits. Default: the zero hash.",
        show_default=False,
    ),
    rpc_url: str | None = RpcOpt,
    passphrase_file: Path | None = PassFileOpt,
    timeout: float = TimeoutOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Submit OperatorStake::register(stake, attestation_hash) signed by NAME; wait for a block."""
    stake_value = inputs.stake_plancks(stake)
    hash_value = inputs.h256(attestation_hash)
    url = rpc.resolve_rpc_url(rpc_url)
    rpc.require_websocket(url)
    _, keypair = _unlock(name, passphrase_file)
    substrate = rpc.connect(url, timeout)
    with rpc.rpc_errors(url, timeout):
        operator.require_pallet(substrate, url)
        sub = _submit(
            json_out,
            lambda: operator.register(substrate, keypair, stake_value, hash_value, name),
        )
        symbol = operator.token_symbol(substrate)
        next_epoch = operator.current_epoch(substrate) if sub.success else None
    _report(sub, json_out, symbol)
    if not json_out and next_epoch is not None:
        typer.echo(f"next: wallet-cli heartbeat-test {name} --submit --epoch {next_epoch}")


@app.command("heartbeat-test")
def heartbeat_test(
    name: str = NameArg,
    epoch: str = typer.Option(..., "--epoch", help="Epoch number (u64); pass the current epoch."),
    submit: bool = typer.Option(
        False, "--submit", help="Submit OperatorStake::heartbeat(epoch) and wait for a block."
    ),
    timestamp: str | None = typer.Option(
        None, "--timestamp", help="Unix seconds for the payload (default: now). Not with --submit."
    ),
    rpc_url: str | None = RpcOpt,
    passphrase_file: Path | None = PassFileOpt,
    timeout: float = TimeoutOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Without --submit: print the signed gateway heartbeat payload (JSON); with it: submit it.

    The payload carries the genesis hash, read from the node (chain_getBlockHash [0]), so both
    forms need the RPC.
    """
    epoch_value = inputs.epoch(epoch)
    if submit and timestamp is not None:
        raise InputError("--timestamp: only for the payload; drop it or drop --submit")
    ts_value = inputs.timestamp(timestamp) if timestamp is not None else int(time.time())
    url = rpc.resolve_rpc_url(rpc_url)
    if submit:
        rpc.require_websocket(url)
    _, keypair = _unlock(name, passphrase_file)
    substrate = rpc.connect(url, timeout)
    with rpc.rpc_errors(url, timeout):
        if not submit:
            genesis = operator.genesis_hash(substrate)
            payload = sign_heartbeat(
                keypair, epoch=epoch_value, timestamp=ts_value, genesis_hash=genesis
            )
            _emit_json(payload)
            return
        operator.require_pallet(substrate, url)
        sub = _submit(json_out, lambda: operator.heartbeat(substrate, keypair, epoch_value, name))
        symbol = operator.token_symbol(substrate)
    _report(sub, json_out, symbol)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"wallet-cli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Operator accounts of the NET test network."""


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, prog_name="wallet-cli", standalone_mode=True)
    except OpsError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except SubstrateRequestException as exc:
        typer.echo(f"error: the node refused an RPC request: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
