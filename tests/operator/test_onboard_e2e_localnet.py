"""Operator onboarding end to end (tests/operator/onboard_e2e_cases.py) on the local network
itself: ``ops-tools localnet up`` on inventories/local, its fixed ports under
/tmp/net-localnet.lock, with the must-hold command line that relies on the local defaults."""

from __future__ import annotations

import pytest

# The cases and their fixture, in the order they run: pytest keeps the import's order.
# isort: off
from tests.operator.onboard_e2e_cases import (  # noqa: F401
    PASSPHRASE,
    onboarded,
    test_killed_after_attestation_resumes_and_registers_once,
    test_report_and_secrets,
    test_gateway_routes_to_the_worker_and_settlement_pays,
    test_runs_again_repeat_nothing,
)
# isort: on
from tests.operator.onboard_stacks import localnet_stack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with localnet_stack(tmp_path_factory.mktemp("onboard-localnet"), PASSPHRASE) as network:
        yield network
