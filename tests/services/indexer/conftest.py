"""A fast development chain for the indexer's suites (one authority, short slots)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.devnode import DevNode, plain_spec, raw_spec

SLOT_MS = 400
EPOCH_LENGTH = 20


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevNode]:
    root = tmp_path_factory.mktemp("chain")
    spec = raw_spec(plain_spec(root / "plain.json", chain_id="indexer_net", slot_ms=SLOT_MS,
                               epoch_length=EPOCH_LENGTH))
    node = DevNode(root / "alice", str(spec), name="alice").start()
    try:
        node.wait_for(lambda: node.best() >= 1, 30, "the first block")
        yield node
    finally:
        node.stop()
