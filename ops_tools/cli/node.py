"""``ops-tools node``: build the pallet-suite node at a revision (cached) and derived artifacts."""

from __future__ import annotations

import signal
from pathlib import Path

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from ops_tools.build.artifact import Artifact
from ops_tools.build.builder import BuildError, BuildRequest, Events, build
from ops_tools.build.devnode_artifact import make_devnode_artifact
from ops_tools.build.devnode_bundle import build_devnode_bundle
from ops_tools.build.layout import DEFAULT_RUNTIME_GLOB
from ops_tools.build.smoke import DEV_RUNTIME_FEATURE, TESTNET_CHAIN_ID
from ops_tools.cli.output import console, err_console, print_json

app = typer.Typer(
    help="Node artifacts: build the pallet-suite node at a revision, cached.", no_args_is_help=True
)

# Module-level option singletons: Path-typed defaults may not be calls in signatures (B008).
CacheOpt = typer.Option(
    None, "--cache", help="Cache directory [default: $OPS_TOOLS_CACHE or ~/.cache/net-ops/builds]"
)
FromOpt = typer.Option(..., "--from", help="A node artifact directory (from `node build`).")
OutOpt = typer.Option(None, "--out", help="Where to write it [default: in the cache].")


class RichEvents(Events):
    """Steps as lines on stderr; while cargo runs, a spinner with its latest line (on a tty)."""

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._task: int | None = None

    def step(self, message: str) -> None:
        err_console.print(f"· {message}", markup=False, style="dim")

    def waiting(self, message: str) -> None:
        err_console.print(f"· waiting: {message}", markup=False, style="yellow")

    def cargo_started(self, key: str) -> None:
        err_console.print("· cargo build --release --locked", markup=False, style="dim")
        if not err_console.is_terminal:
            return
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("cargo: starting", total=None)

    def cargo_line(self, line: str) -> None:
        if self._progress is not None and self._task is not None and line.strip():
            self._progress.update(self._task, description=f"cargo: {line.strip()[:90]}")

    def cargo_finished(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _show(artifact: Artifact, headline: str) -> None:
    m = artifact.manifest
    table = Table(show_header=False, box=None)
    rows = [
        ("artifact", str(artifact.directory)),
        ("kind", m["kind"]),
        ("repo", m["repo"]),
        ("ref", m["ref"]),
        ("revision", m["revision"]),
        ("features", ", ".join(m["features"]) or "(none)"),
        ("node", f"{m['node_binary']} ({m['node_version']})"),
        ("node sha256", m["node_binary_sha256"]),
        ("runtime", m["runtime"]),
        (
            "runtime version",
            f"{m['runtime_spec_name']} spec {m['runtime_spec_version']}"
            f" state {m['runtime_state_version']}",
        ),
        ("runtime blake2_256", m["runtime_blake2_256"]),
        ("rustc", m.get("rustc_version", "-")),
    ]
    for k, v in rows:
        table.add_row(k, str(v))
    console.print(headline, markup=False)
    console.print(table)


@app.command("build")
def build_cmd(
    repo: str = typer.Option(..., "--repo", help="Git URL or local path of the pallet-suite."),
    ref: str = typer.Option(..., "--ref", help="Branch, tag, or full or abbreviated commit sha."),
    package: str | None = typer.Option(None, "--package", "-p", help="Cargo package of the node."),
    features: str = typer.Option(
        DEV_RUNTIME_FEATURE, "--features", help="Cargo features, comma-separated ('' for none)."
    ),
    runtime_glob: str = typer.Option(
        DEFAULT_RUNTIME_GLOB,
        "--runtime-glob",
        help="Runtime blob; 'target/...' is cargo's target dir.",
    ),
    cache: Path | None = CacheOpt,
    force: bool = typer.Option(False, "--force", help="Rebuild even if the artifact is cached."),
    allow_dirty: bool = typer.Option(
        False, "--allow-dirty", help="Build the commit of a dirty local checkout anyway."
    ),
    builder: str = typer.Option("local", "--builder", help="local, or docker (pinned Rust image)."),
    image: str | None = typer.Option(None, "--image", help="Rust image for --builder docker."),
    chain_id: str = typer.Option(
        TESTNET_CHAIN_ID, "--chain-id", help="Chain id the node must know (smoke check)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Build the node at REF (or reuse the cached artifact) and print where it is."""
    # A terminated build must unwind (stop cargo, drop the staging dir), not just vanish.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    events = RichEvents()
    request = BuildRequest(
        repo=repo,
        ref=ref,
        package=package,
        features=(features,),
        runtime_glob=runtime_glob,
        cache=cache,
        force=force,
        allow_dirty=allow_dirty,
        builder=builder,
        image=image,
        chain_id=chain_id,
    )
    try:
        result = build(request, events)
    except BuildError as exc:
        if exc.log_tail:
            err_console.print(f"last lines of {exc.log}:", markup=False, style="dim")
            for line in exc.log_tail:
                err_console.print(f"  {line}", markup=False)
        raise
    finally:
        events.cargo_finished()
    if json_out:
        # The manifest keeps the ref of the build that made it; show what was asked for too.
        print_json(
            {
                **result.artifact.manifest,
                "artifact_dir": str(result.artifact.directory),
                "cache_hit": result.cache_hit,
                "requested_ref": ref,
            }
        )
        return
    m = result.artifact.manifest
    headline = (
        "cache hit: no build needed"
        if result.cache_hit
        else f"built in {m['build_duration_s']:.1f}s"
    )
    _show(result.artifact, headline)


@app.command("devnode-artifact")
def devnode_artifact_cmd(
    source: Path = FromOpt,
    out: Path | None = OutOpt,
    cache: Path | None = CacheOpt,
    devnode: str | None = typer.Option(
        None, "--devnode", help="devnode executable [default: the one installed beside ops-tools]."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Pair the development node with the runtime blob of a node artifact."""
    artifact = make_devnode_artifact(source, out=out, cache=cache, devnode=devnode)
    if json_out:
        print_json({**artifact.manifest, "artifact_dir": str(artifact.directory)})
        return
    _show(artifact, "development-node artifact written")


@app.command("devnode-bundle")
def devnode_bundle_cmd(
    out: Path = typer.Option(..., "--out", help="The executable file to write."),
    json_out: bool = typer.Option(False, "--json", help='Print {"path": ..., "sha256": ...}.'),
) -> None:
    """The development node as one executable file that runs with a Debian 12 host's python3
    (what a remote inventory's node binary points at); the same sources give the same bytes."""
    bundle = build_devnode_bundle(out)
    if json_out:
        print_json({"path": str(bundle.path), "sha256": bundle.sha256})
        return
    console.print(f"development-node bundle written: {bundle.path}", markup=False)
    console.print(f"sha256 {bundle.sha256}; {len(bundle.distributions)} distributions bundled",
                  markup=False)
