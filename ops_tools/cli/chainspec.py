"""``ops-tools chainspec``: genesis hash and inspection of chain specs."""

from __future__ import annotations

from pathlib import Path

import typer

from ops_tools.cli.output import console, err_console, print_json, progress
from ops_tools.errors import InputError

# The chainspec modules are imported inside each command: genesis-hash is timed as a whole
# process, and the others pull in what it does not need.

app = typer.Typer(help="Chain specs: genesis hash, inspection, rendering.", no_args_is_help=True)

SpecArg = typer.Argument(
    ..., help="Path of a chain spec JSON file (raw, or light).", metavar="SPEC"
)


@app.command("genesis-hash")
def genesis_hash(
    spec: Path = SpecArg,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    state_version: int | None = typer.Option(
        None, "--state-version", min=0, max=1, help="Override the runtime's state version (0 or 1)."
    ),
) -> None:
    """Compute the genesis hash a node derives from SPEC, offline."""
    from ops_tools.chainspec.genesis import genesis_of_file

    info = genesis_of_file(spec, state_version=state_version)
    if json_out:
        print_json(info.to_json())
    else:
        typer.echo("0x" + info.genesis_hash.hex())


@app.command("inspect")
def inspect(
    spec: Path = SpecArg,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Summarise SPEC: identity, properties, boot nodes, runtime version and APIs, storage."""
    from rich.table import Table

    from ops_tools.chainspec import load_spec
    from ops_tools.chainspec.inspect import summarize

    summary = summarize(load_spec(spec))
    if json_out:
        print_json(summary)
        return
    table = Table(show_header=False, box=None)
    for key in (
        "name",
        "id",
        "protocolId",
        "chainType",
        "spec_kind",
        "genesis_hash",
        "state_version",
        "storage_keys",
        "code_size",
        "code_blake2_256",
    ):
        table.add_row(key, str(summary.get(key)))
    table.add_row(
        "properties", ", ".join(f"{k}={v}" for k, v in (summary["properties"] or {}).items())
    )
    boot = summary["bootNodes"] or []
    table.add_row("bootNodes", "\n".join(boot) if boot else "(none)")
    rt = summary.get("runtime")
    if rt:
        table.add_row(
            "runtime",
            f"{rt['spec_name']}/{rt['impl_name']} spec {rt['spec_version']}"
            f" impl {rt['impl_version']} tx {rt['transaction_version']}",
        )
        table.add_row(
            "apis", "\n".join(f"{a['name'] or a['id']} v{a['version']}" for a in rt["apis"])
        )
    else:
        table.add_row("runtime", "(no embedded version)")
    console.print(table)


def _resolve_inputs(
    node: Path | None, runtime: Path | None, artifact: Path | None
) -> tuple[Path, Path | None, str | None, dict[str, object] | None]:
    """The node binary, runtime and revision, from ``--artifact`` or from ``--node/--runtime``."""
    if artifact is not None:
        if node is not None or runtime is not None:
            raise InputError(
                "--artifact gives the node and the runtime; do not pass --node/--runtime too"
            )
        from ops_tools.build.artifact import load_artifact

        art = load_artifact(artifact)
        provenance = {
            k: art.manifest.get(k) for k in ("repo", "ref", "revision", "features", "kind")
        }
        return art.node_binary, art.runtime, art.manifest.get("revision"), provenance
    if node is None:
        raise InputError("give the node with --node BINARY, or an artifact with --artifact DIR")
    return node, runtime, None, None


NetworkOpt = typer.Option(..., "--network", help="Network definition (chainspec/networks/*.yml).")
NodeOpt = typer.Option(
    None, "--node", help="Node binary with build-spec (the development node or a Substrate node)."
)
RuntimeOpt = typer.Option(
    None, "--runtime", help="Runtime blob for :code (default: the node's built-in)."
)
ArtifactOpt = typer.Option(None, "--artifact", help="Artifact directory of 'ops-tools node build'.")


@app.command("render")
def render_cmd(
    network: Path = NetworkOpt,
    node: Path | None = NodeOpt,
    runtime: Path | None = RuntimeOpt,
    artifact: Path | None = ArtifactOpt,
    out: Path | None = typer.Option(
        None, "--out", help="Output directory (plain.json, raw.json, manifest.json)."
    ),
    revision: str | None = typer.Option(
        None, "--revision", help="Pallet-suite revision to record."
    ),
    check: bool = typer.Option(
        False, "--check", help="Compare with the lock file; exit 1 on a difference."
    ),
    update_lock: bool = typer.Option(
        False, "--update-lock", help="Write the lock file from this render."
    ),
    lock: Path | None = typer.Option(
        None, "--lock", help="Lock file (default chainspec/<network>.lock.json)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Render NETWORK into a plain and a raw chain spec, byte for byte reproducibly."""
    from ops_tools.chainspec.lock import compare_lock, default_lock_path, read_lock, write_lock
    from ops_tools.chainspec.render import render

    if out is None and not check:
        raise InputError("--out DIR is required (or --check alone to compare with the lock)")
    node_path, runtime_path, art_revision, provenance = _resolve_inputs(node, runtime, artifact)
    with progress("rendering the chain spec", not json_out):
        rendered = render(
            network,
            node_path,
            runtime_path,
            pallet_suite_revision=revision or art_revision,
            artifact=provenance,
        )
    if out is not None:
        rendered.write(out)
    lock_path = lock or default_lock_path(network)
    if update_lock:
        write_lock(lock_path, rendered.manifest)
    mismatches = compare_lock(read_lock(lock_path), rendered.manifest) if check else []
    if json_out:
        print_json(rendered.manifest)
    else:
        m = rendered.manifest
        console.print(f"genesis hash   {m['genesis_hash']}")
        console.print(f"raw spec       sha256 {m['raw_spec_sha256']}")
        console.print(
            f"runtime        {m['runtime']['spec_name']} v{m['runtime']['spec_version']}"
            f" (state version {m['runtime']['state_version']}) {m['runtime']['blake2_256']}"
        )
        if out is not None:
            console.print(f"written to     {out}/plain.json, raw.json, manifest.json")
        if check and not mismatches:
            console.print(f"lock           matches {lock_path}")
    if mismatches:
        err_console.print(f"error: the render differs from the lock {lock_path}:", markup=False)
        for line in mismatches:
            err_console.print(f"  {line}", markup=False)
        err_console.print(
            "  review the change; if intended, run render --update-lock and commit it", markup=False
        )
        raise typer.Exit(1)


@app.command("verify-determinism")
def verify_determinism_cmd(
    network: Path = NetworkOpt,
    node: Path | None = NodeOpt,
    runtime: Path | None = RuntimeOpt,
    artifact: Path | None = ArtifactOpt,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Render twice in different environments (cwd, TMPDIR, TZ, locale, seed, umask); compare."""
    from ops_tools.chainspec.determinism import RenderRequest, verify_determinism

    node_path, runtime_path, revision, provenance = _resolve_inputs(node, runtime, artifact)
    request = RenderRequest(network, node_path, runtime_path, revision, provenance)
    with progress("rendering twice", not json_out):
        result = verify_determinism(request)
    if json_out:
        print_json(result.__dict__)
    elif result.identical:
        console.print(
            f"deterministic: identical bytes in both renders; raw spec sha256"
            f" {result.raw_sha256}, genesis {result.genesis_hash}"
        )
    if not result.identical:
        err_console.print(f"error: renders differ: {result.difference}", markup=False)
        raise typer.Exit(1)


@app.command("diff")
def diff_cmd(
    a: Path = typer.Argument(..., metavar="A", help="Raw chain spec (before)."),
    b: Path = typer.Argument(..., metavar="B", help="Raw chain spec (after)."),
    json_out: bool = typer.Option(False, "--json", help="Print the differences as JSON."),
) -> None:
    """What changed between two raw specs: identity, runtime version, storage by item."""
    from rich.table import Table

    from ops_tools.chainspec import load_spec
    from ops_tools.chainspec.diff import diff_specs

    d = diff_specs(load_spec(a), load_spec(b))
    if json_out:
        print_json(d.to_json())
        return
    if d.identical:
        console.print(f"identical genesis: {d.genesis_hash[0]}")
        return
    console.print(f"genesis hash: {d.genesis_hash[0]} -> {d.genesis_hash[1]}")
    for name, (x, y) in d.fields.items():
        console.print(f"{name}: {x!r} -> {y!r}", markup=False)
    for name, (x, y) in d.runtime.items():
        console.print(f"runtime {name}: {x!r} -> {y!r}", markup=False)
    table = Table("storage item", "added", "removed", "changed")
    for item, changes in sorted(d.items.items()):
        table.add_row(item, *(str(len(changes[c])) for c in ("added", "removed", "changed")))
    if d.items:
        console.print(table)
