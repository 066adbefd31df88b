"""What a publication is made of, as one digest, and the record of it next to the served site.

A converge that changes nothing must not pay for a publication (a store update, a MkDocs
build): it compares the digest of the inputs (the render, the node, the docs sources, the
release history, the page generators, the endpoints) with the one the served site records, and
stops there when they match. Standard library only, so the check costs milliseconds in any
process (the docs role's action plugin runs it inside Ansible).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops_tools import atomic

RECORD_SUFFIX = ".published.json"
_CODE = Path(__file__).parent


@dataclass(frozen=True)
class Record:
    """What the served site was published from (``<site>.published.json``)."""

    inputs: str
    build: str
    current_genesis: str | None
    pages: int

    def to_json(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "build": self.build,
                "current_genesis": self.current_genesis, "pages": self.pages}


def record_path(site: Path) -> Path:
    return site.with_name(site.name + RECORD_SUFFIX)


def _file(digest: Any, label: str, path: Path) -> None:
    digest.update(label.encode() + b"\0")
    try:
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    except OSError:
        digest.update(b"missing")


def _tool_versions() -> str:
    from importlib.metadata import version

    return f"mkdocs {version('mkdocs')}; material {version('mkdocs-material')}"


def inputs_digest(
    *,
    mkdocs_config: Path,
    docs_dir: Path,
    guides: dict[str, Path],
    store: Path,
    endpoints: dict[str, str],
    render_dir: Path | None,
    node_kind: str | None,
    node_key: str | None,
) -> str:
    """``node_key``: what names the node's content cheaply (the bundle's source digest, or the
    node binary's path, size and modification time)."""
    digest = hashlib.sha256()
    for code in sorted(_CODE.glob("*.py")):
        _file(digest, f"code {code.name}", code)
    digest.update(_tool_versions().encode() + b"\0")
    _file(digest, "mkdocs.yml", mkdocs_config)
    for md in sorted(docs_dir.glob("*.md")):
        _file(digest, f"docs {md.name}", md)
    for dest, src in sorted(guides.items()):
        _file(digest, f"guide {dest}", src)
    _file(digest, "index", store / "index.json")
    digest.update(json.dumps(endpoints, sort_keys=True).encode() + b"\0")
    if render_dir is not None:
        _file(digest, "raw", render_dir / "raw.json")
        _file(digest, "manifest", render_dir / "manifest.json")
        digest.update(f"node {node_kind} {node_key}".encode())
    return digest.hexdigest()


def stat_key(path: Path) -> str:
    st = path.stat()
    return f"{os.path.realpath(path)} {st.st_size} {st.st_mtime_ns}"


def read_record(site: Path) -> Record | None:
    try:
        data = json.loads(record_path(site).read_text())
        return Record(str(data["inputs"]), str(data["build"]), data.get("current_genesis"),
                      int(data.get("pages", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def served(site: Path, record: Record) -> bool:
    """The site link still points at the recorded build, and that build is there with the
    files its current release lists (the record says what was built; the disk, what is
    served)."""
    try:
        if Path(os.readlink(site)).name != record.build or not (site / "index.html").is_file():
            return False
        current = site / "releases" / "current"
        listed = json.loads((current / "release.json").read_text()).get("files", {})
    except FileNotFoundError:
        return record.current_genesis is None  # no release published: no release files
    except (OSError, ValueError, AttributeError):
        return False
    return all((current / name).is_file() for name in listed)


def write_record(site: Path, record: Record) -> None:
    atomic.write_text(record_path(site), json.dumps(record.to_json(), indent=1) + "\n")
