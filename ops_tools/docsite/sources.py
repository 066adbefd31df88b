"""Where the site's hand-written pages come from (the page generators are in ``pages.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Sources:
    """What the site is made of, besides the release store."""

    mkdocs_config: Path
    docs_dir: Path
    # Destination in the site (e.g. "operators/full-node.md") -> Markdown file in the project.
    guides: dict[str, Path] = field(default_factory=dict)


def default_sources(project_root: Path) -> Sources:
    return Sources(
        mkdocs_config=project_root / "mkdocs.yml",
        docs_dir=project_root / "docs",
        guides={
            "operators/full-node.md": project_root / "inventories" / "operator" / "README.md",
            "operators/testnet-inventory.md": project_root
            / "inventories"
            / "testnet"
            / "README.md",
        },
    )
