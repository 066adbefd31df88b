# The two entry points README.md promises; both set up the machine first.
.PHONY: bootstrap up down test determinism bench

bootstrap:
	@scripts/bootstrap

up: bootstrap
	.venv/bin/ops-tools localnet up

down: bootstrap
	.venv/bin/ops-tools localnet down

# .venv/bin first on PATH: molecule and ansible-runner look for the ansible-* commands there.
test: bootstrap
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	PATH="$(CURDIR)/.venv/bin:$$PATH" .venv/bin/pytest

# Render the local network's chain spec twice in different environments, compare the bytes, and
# compare the genesis with the reviewed lock file.
determinism: bootstrap
	.venv/bin/ops-tools chainspec verify-determinism --network chainspec/networks/local.yml --node .venv/bin/devnode
	.venv/bin/ops-tools chainspec render --network chainspec/networks/local.yml --node .venv/bin/devnode --check

bench: bootstrap
	.venv/bin/python benchmarks/run.py
