"""Reset cycles: rebuild the network when the pallet-suite revision changes the genesis.

A journaled, resumable state machine (``cycle``) over phases (``phases``); the decision is pure
logic (``decide``); the time-critical host operations go through pyinfra (``hostops``) and read
the host manifests the Ansible roles write; provisioning stays with the roles.
"""
