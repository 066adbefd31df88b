"""The suite's one file lock (ops_tools/filelock.py): two holders never overlap, a holder that
would not wait learns who holds it, and a waiter is told once and then gets it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ops_tools.filelock import LockBusy, file_lock


def test_a_second_holder_that_will_not_wait_is_told_who_holds_it(tmp_path: Path) -> None:
    lock = tmp_path / "sub" / "lock"
    with file_lock(lock, holder={"pid": 1, "what": "first"}, mode=0o600):
        assert oct(lock.stat().st_mode & 0o777) == "0o600"
        with pytest.raises(LockBusy) as busy, file_lock(lock, wait=False):
            pytest.fail("two holders at once")
        assert busy.value.holder == {"pid": 1, "what": "first"}
    with file_lock(lock, wait=False, holder={"what": "second"}):  # released at the end
        assert json.loads(lock.read_text()) == {"what": "second"}


def test_a_holder_that_wrote_no_json_is_quoted(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    lock.write_text("not json")
    with file_lock(lock), pytest.raises(LockBusy) as busy, file_lock(lock, wait=False):
        pass
    assert busy.value.holder == {"text": "not json"}


def test_a_waiter_is_told_once_and_holds_it_only_after_the_holder(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    events: list[str] = []
    told = threading.Event()

    def waiter() -> None:
        with file_lock(lock, on_wait=lambda: (events.append("told"), told.set())):
            events.append("waiter holds it")

    with file_lock(lock):
        thread = threading.Thread(target=waiter)
        thread.start()
        assert told.wait(30), "the waiter was not told that the lock is taken"
        events.append("holder releases")
    thread.join(30)
    assert events == ["told", "holder releases", "waiter holds it"]
