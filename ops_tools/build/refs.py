"""Classification of what the user typed for ``--repo`` and ``--ref`` (pure, no git)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ops_tools.errors import InputError

FULL_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# git accepts abbreviations down to 4 hex digits.
SHORT_SHA = re.compile(r"^[0-9a-f]{4,63}$")
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# scp-like syntax: user@host:path or host:path (but not a Windows drive or a relative path).
_SCP = re.compile(r"^(?:[^@/\s]+@)?[A-Za-z0-9.-]+:(?!//)")
# What git check-ref-format forbids anywhere in a ref name, plus whitespace and controls.
_USERINFO_SECRET = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*):[^/@\s]*@")
_BAD_REF = re.compile(r"(\.\.|@\{|[\x00-\x20\x7f~^:?*\[\\])")


@dataclass(frozen=True)
class RepoSource:
    """Where the pallet-suite comes from. ``location`` is what git is given to fetch from."""

    kind: str  # "path" (a local directory) or "url"
    location: str

    @property
    def mirror_name(self) -> str:
        """The bare mirror's directory name in the cache: readable stem + hash of the location."""
        last = self.location.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        stem = re.sub(r"\.git$", "", last)
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:40] or "repo"
        digest = hashlib.sha256(self.location.encode()).hexdigest()[:12]
        return f"{stem}-{digest}.git"


def redact(location: str) -> str:
    """The location with any password or token in its userinfo masked, for manifests and
    messages (``https://user:TOKEN@host/x`` -> ``https://user:***@host/x``)."""
    return _USERINFO_SECRET.sub(r"\1:***@", location)


def classify_repo(repo: str, cwd: Path | None = None) -> RepoSource:
    """A URL (``https://``, ``ssh://``, ``file://``, ``user@host:path``) or a local path."""
    text = repo.strip()
    if not text:
        raise InputError("--repo is empty: give a git URL or the path of a pallet-suite checkout")
    if text.startswith("-"):
        raise InputError(f"--repo {repo!r} starts with '-': give a git URL or a path")
    if _URL.match(text) or (_SCP.match(text) and not Path(text).exists()):
        return RepoSource("url", text)
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    return RepoSource("path", str(path.resolve()))


def validate_ref(ref: str) -> str:
    """Refuse what can never name a revision, before any git process sees it."""
    if not ref:
        raise InputError("--ref is empty: give a branch, a tag or a commit sha")
    if ref.startswith("-"):
        raise InputError(f"--ref {ref!r} starts with '-': give a branch, a tag or a commit sha")
    bad = _BAD_REF.search(ref)
    if bad or ref.endswith((".", "/", ".lock")) or "//" in ref:
        raise InputError(
            f"--ref {ref!r} is not a valid git ref name"
            + (f" (it contains {bad.group(0)!r})" if bad else "")
            + ": give a branch, a tag or a commit sha"
        )
    return ref


def is_full_sha(ref: str) -> bool:
    return bool(FULL_SHA.match(ref))


def ref_candidates(ref: str) -> list[str]:
    """Names to try, in order, in a mirror: branch, tag, full ref name, abbreviated sha.

    Branches and tags come first so that a branch called ``cafe`` wins over a commit whose sha
    starts with ``cafe``; HEAD (the default branch of the mirror) is accepted as is.
    """
    ref = validate_ref(ref)
    if is_full_sha(ref):
        return [ref]
    out: list[str] = []
    if ref == "HEAD":
        return ["HEAD"]
    if ref.startswith("refs/"):
        out.append(ref)
    else:
        out += [f"refs/heads/{ref}", f"refs/tags/{ref}"]
    if SHORT_SHA.match(ref):
        out.append(ref)
    return out
