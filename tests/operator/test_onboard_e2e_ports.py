"""Operator onboarding end to end (tests/operator/onboard_e2e_cases.py) with every service on
free loopback ports: a development node with 3 s epochs, ``net-faucet``, ``net-attestation``,
``net-gateway`` and a supervisord of the test (``onboard_stacks.ports_stack``), no lock."""

from __future__ import annotations

import pytest

# The cases and their fixture, in the order they run: pytest keeps the import's order.
# isort: off
from tests.operator.onboard_e2e_cases import (  # noqa: F401
    onboarded,
    test_killed_after_attestation_resumes_and_registers_once,
    test_report_and_secrets,
    test_gateway_routes_to_the_worker_and_settlement_pays,
    test_runs_again_repeat_nothing,
)
# isort: on

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def net(ports_net):
    return ports_net
