"""The release index: publishing makes a genesis current and marks the one before replaced."""

from __future__ import annotations

import pytest

from ops_tools.docsite.releases import current_release, empty_index, publish
from ops_tools.errors import InputError

A, B = "0x" + "aa" * 32, "0x" + "bb" * 32


def release(genesis: str, node_sha: str = "11") -> dict:
    return {"genesis_hash": genesis, "files": {"raw.json": {"sha256": genesis[2:], "size": 1},
                                               "devnode": {"sha256": node_sha, "size": 1}}}


def test_first_publication_is_current_and_dated() -> None:
    index, result = publish(empty_index(), release(A), "2026-01-01T00:00:00Z")
    assert result.changed and result.replaced is None
    assert current_release(index) == {**release(A), "status": "current",
                                      "published_at": "2026-01-01T00:00:00Z"}


def test_a_new_genesis_replaces_the_current_one() -> None:
    index, _ = publish(empty_index(), release(A), "t1")
    index, result = publish(index, release(B), "t2")
    assert result.replaced is not None and result.replaced["genesis_hash"] == A
    assert [(r["genesis_hash"], r["status"]) for r in index["releases"]] == [
        (B, "current"), (A, "replaced")]
    old = index["releases"][1]
    assert (old["replaced_at"], old["replaced_by"], old["published_at"]) == ("t2", B, "t1")


def test_publishing_the_current_release_again_changes_nothing() -> None:
    index, _ = publish(empty_index(), release(A), "t1")
    again, result = publish(index, release(A), "t2")
    assert not result.changed and again == index


def test_a_new_node_on_the_same_genesis_refreshes_the_release() -> None:
    index, _ = publish(empty_index(), release(A), "t1")
    index, result = publish(index, release(A, node_sha="22"), "t2")
    assert result.changed and result.replaced is None
    (only,) = index["releases"]
    assert only["files"]["devnode"]["sha256"] == "22"
    assert (only["status"], only["published_at"], only["updated_at"]) == ("current", "t1", "t2")


def test_a_genesis_that_comes_back_is_current_again_once() -> None:
    index, _ = publish(empty_index(), release(A), "t1")
    index, _ = publish(index, release(B), "t2")
    index, result = publish(index, release(A), "t3")
    assert result.replaced is not None and result.replaced["genesis_hash"] == B
    assert [(r["genesis_hash"], r["status"]) for r in index["releases"]] == [
        (A, "current"), (B, "replaced")]
    assert "replaced_by" not in index["releases"][0]


@pytest.mark.parametrize("bad", ["0x1234", "aa" * 32, "0x" + "AA" * 32, None])
def test_a_release_must_be_named_by_a_genesis_hash(bad: object) -> None:
    with pytest.raises(InputError, match="genesis hash"):
        publish(empty_index(), {"genesis_hash": bad, "files": {}}, "t")
