"""What onboarding makes of the gateway's answers: a Retry-After is a bounded pause, whatever the
gateway (or whoever answers at its URL) writes there."""

from __future__ import annotations

import pytest

from ops_tools.operator.gateway_client import MAX_PAUSE_S, _retry_after


@pytest.mark.parametrize("header,pause", [
    ("2", 2.0),
    ("0.5", 0.5),
    (None, 0.0),
    ("", 0.0),
    ("-3", 0.0),
    ("1e9", MAX_PAUSE_S),
    ("inf", 0.0),
    ("nan", 0.0),
    ("Wed, 21 Oct 2026 07:28:00 GMT", 0.0),  # an HTTP date: no pause is taken from it
])
def test_retry_after_is_a_bounded_number_of_seconds(header, pause):
    assert _retry_after(header) == pause
