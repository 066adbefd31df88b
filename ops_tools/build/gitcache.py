"""Git at the edge: a bare mirror per repository, ref resolution, one worktree per revision."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ops_tools.build.refs import RepoSource, is_full_sha, redact, ref_candidates
from ops_tools.errors import InputError, OpsError

TOOLCHAIN_FILES = ("rust-toolchain.toml", "rust-toolchain")


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never stop to ask for credentials: a build in CI must fail, not hang.
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_ASKPASS="true")
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    return env


def git(*args: str, cwd: Path | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, env=_git_env(), capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=600, check=False,
        )
    except FileNotFoundError:
        raise OpsError("git is not installed or not on PATH; install git") from None
    if check and proc.returncode != 0:
        raise OpsError(f"git {' '.join(args[:2])} failed: {_last_line(proc.stderr)}")
    return proc


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return redact(lines[-1]) if lines else "(no message)"


def check_source(src: RepoSource, repo_arg: str, allow_dirty: bool) -> None:
    """A local path must be a git repository; a checkout with uncommitted tracked changes is
    refused, because the build uses the committed revision and would silently ignore them."""
    if src.kind != "path":
        return
    path = Path(src.location)
    if not path.exists():
        raise InputError(f"--repo {repo_arg!r}: repository not found (no such directory)")
    probe = git("rev-parse", "--is-bare-repository", cwd=path, check=False)
    if probe.returncode != 0:
        raise InputError(
            f"--repo {repo_arg!r}: repository not found ({path} is not a git repository)"
        )
    if probe.stdout.strip() == "true" or allow_dirty:
        return
    status = git("status", "--porcelain", "--untracked-files=no", cwd=path)
    changed = [ln[3:] for ln in status.stdout.splitlines() if ln.strip()]
    if changed:
        sample = ", ".join(changed[:3]) + (", ..." if len(changed) > 3 else "")
        raise InputError(
            f"--repo {repo_arg!r}: the worktree is dirty ({len(changed)} changed tracked"
            f" file(s): {sample}); builds use committed content only: commit or stash the"
            " changes, or pass --allow-dirty to build the committed revision anyway"
        )


def update_mirror(src: RepoSource, repo_arg: str, mirror: Path, want: str | None = None) -> None:
    """Create the bare mirror, or fetch into it. ``want``: a full sha that, when already
    present, makes the fetch unnecessary (a pinned revision never moves)."""
    if mirror.exists():
        if want and _has_commit(mirror, want):
            return
        proc = git("fetch", "--prune", "--quiet", "origin", cwd=mirror, check=False)
        if proc.returncode != 0:
            raise InputError(
                f"--repo {repo_arg!r}: repository not found or not reachable"
                f" (git fetch: {_last_line(proc.stderr)}); check the URL or path"
            )
        _fetch_unadvertised(mirror, want)
        return
    mirror.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{mirror.name}.", dir=mirror.parent))
    try:
        proc = git("clone", "--mirror", "--quiet", "--", src.location, str(scratch / "m"),
                   check=False)
        if proc.returncode != 0:
            raise InputError(
                f"--repo {repo_arg!r}: repository not found or not reachable"
                f" (git clone: {_last_line(proc.stderr)}); check the URL or path"
            )
        (scratch / "m").replace(mirror)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _fetch_unadvertised(mirror, want)


def _has_commit(mirror: Path, sha: str) -> bool:
    return git("cat-file", "-e", f"{sha}^{{commit}}", cwd=mirror, check=False).returncode == 0


def _fetch_unadvertised(mirror: Path, want: str | None) -> None:
    """A commit on no branch or tag (a detached HEAD, a PR head) is not in a mirror fetch;
    ask for it by sha. If the server refuses, resolve() reports the unknown commit."""
    if want and not _has_commit(mirror, want):
        git("fetch", "--quiet", "origin", want, cwd=mirror, check=False)


def local_head(path: Path) -> str | None:
    """The commit checked out in a local (non-bare) repository: what ``--ref HEAD`` means for a
    path, rather than the mirror's HEAD (which is fixed when the mirror is created)."""
    proc = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=path, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def resolve(mirror: Path, ref: str, repo_arg: str) -> str:
    """The full sha that ``ref`` names: a branch, a tag (peeled), a full or abbreviated sha."""
    ambiguous = False
    for candidate in ref_candidates(ref):
        proc = git("rev-parse", "--verify", "--quiet", "--end-of-options",
                   f"{candidate}^{{commit}}", cwd=mirror, check=False)
        if proc.returncode == 0:
            return proc.stdout.strip()
        ambiguous = ambiguous or "ambiguous" in proc.stderr
    if ambiguous:
        raise InputError(
            f"--ref {ref!r} is an ambiguous abbreviated sha in {repo_arg}: give more digits"
        )
    what = "commit" if is_full_sha(ref) else "branch, tag or commit"
    raise InputError(
        f"--ref {ref!r}: no {what} of that name in {repo_arg}; check the name"
        " (`git ls-remote` lists branches and tags)"
    )


def commit_time(mirror: Path, revision: str) -> int:
    return int(git("show", "-s", "--format=%ct", revision, cwd=mirror).stdout.strip())


def has_toolchain_file(mirror: Path, revision: str) -> bool:
    """Whether rustup would pick a pinned toolchain inside this revision's worktree."""
    return any(
        git("cat-file", "-e", f"{revision}:{name}", cwd=mirror, check=False).returncode == 0
        for name in TOOLCHAIN_FILES
    )


def ensure_worktree(mirror: Path, revision: str, path: Path) -> Path:
    """A clean checkout of exactly ``revision`` at ``path``, reused when it is still pristine."""
    if path.exists():
        head = git("rev-parse", "HEAD", cwd=path, check=False)
        status = git("status", "--porcelain", "--untracked-files=all", cwd=path, check=False)
        if head.returncode == 0 and head.stdout.strip() == revision and status.returncode == 0 \
                and not status.stdout.strip():
            return path
        # Something wrote into it (or a previous checkout died half-way): start afresh.
        shutil.rmtree(path, ignore_errors=True)
    git("worktree", "prune", cwd=mirror)
    path.parent.mkdir(parents=True, exist_ok=True)
    git("worktree", "add", "--detach", "--force", "--quiet", str(path), revision, cwd=mirror)
    return path
