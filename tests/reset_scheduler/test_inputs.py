"""Bad input is refused before anything is written, with one message naming the variable."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reset_scheduler.conftest import Controller, files_under

CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "missing-required",
        {"reset_scheduler_inventory": None, "reset_scheduler_repo": None},
        "missing required arguments: reset_scheduler_inventory, reset_scheduler_repo",
    ),
    (
        "partial-schedule",
        {"reset_scheduler_schedule": {"on_calendar": "hourly", "minute": "5"}},
        "missing required arguments: day, hour, month, weekday found in reset_scheduler_schedule",
    ),
    (
        "password-in-repo",
        {"reset_scheduler_repo": "https://bot:s3cret@git.example.org/net/pallet-suite.git"},
        "the repo URL must not carry a password",
    ),
    (
        "unknown-user",
        {"reset_scheduler_user": "no-such-user-rs", "reset_scheduler_group": "root"},
        "reset_scheduler_user no-such-user-rs / reset_scheduler_group root does not exist",
    ),
    (
        "bad-calendar",
        {
            "reset_scheduler_backend": "systemd",
            "reset_scheduler_schedule": {
                "on_calendar": "every full moon",
                "minute": "0",
                "hour": "4",
                "day": "*",
                "month": "*",
                "weekday": "*",
            },
        },
        "reset_scheduler_schedule.on_calendar 'every full moon' is not a systemd calendar",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_refused_before_any_change(
    controller: Controller, overrides: dict[str, Any], message: str
) -> None:
    before = files_under(controller.root)
    run = controller.apply(**overrides)
    assert run.rc != 0
    assert message in " ".join(run.out.split()), run.out
    assert "s3cret" not in run.out
    assert files_under(controller.root) == before
