"""Operator onboarding: from a GPU server to a registered operator whose worker serves traffic.

One command (``ops-tools operator onboard``) and one playbook (``playbooks/operator_worker.yml``,
which runs the same command on the host) walk the interface document's onboarding order: GPU
detection, wallet, funding, attestation, stake bind, daemon, first heartbeat. Each step is
journaled, so a run that stopped continues where it stopped and repeats nothing that is done.

Dependencies: ``wallet`` (keystore, chain calls, faucet and attestation clients), ``chain``, and
the attestation report's pure verifier (``attestation.verify``, the checks of the service's
``/v1/verify``) to check a report
locally before it is bound on chain. Never ``deploy`` or ``reset``; the CLI supplies the local
network's defaults.
"""
