# The two entry points README.md promises; both set up the machine first.
.PHONY: bootstrap bootstrap-test up down test test-fast determinism bench

# Workers of make test (pytest-xdist, --dist loadgroup: one worker per group of tests that share
# processes; docs/development.md). Most tests wait on slots and timeouts, not on the two cores;
# serially the suite outgrew CI's 90 min. N=0 runs it serially. The groups are handed out
# longest first (tests/lane_costs.json, tests/process_lane.py), not by test count. Five, not
# four: with four the two cores idled 15 % of the run, every worker waiting at once
# (docs/benchmarks.md).
N ?= 5
XDIST = $(if $(filter 0,$(N)),-p no:xdist,-n $(N) --dist loadgroup --no-loadscope-reorder)

bootstrap:
	@scripts/bootstrap

# What the tests need on top of the local network's: Chromium, debootstrap, systemd-nspawn, ...
bootstrap-test:
	@scripts/bootstrap --test

up: bootstrap
	.venv/bin/ops-tools localnet up

down: bootstrap
	.venv/bin/ops-tools localnet down

# .venv/bin first on PATH: molecule and ansible-runner look for the ansible-* commands there.
# Byte code is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): the
# suite starts thousands of Python processes that import the checkout, and every pytest
# worker collects every test module (docs/benchmarks.md).
KEEP_BYTECODE = PYTHONDONTWRITEBYTECODE=

# scripts/test-lanes runs the tests marked idle (no clock can fail them) beside the workers, at
# the lowest processor priority.
test: bootstrap-test
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	$(KEEP_BYTECODE) PATH="$(CURDIR)/.venv/bin:$$PATH" scripts/test-lanes $(XDIST)

# The loop of every edit: lint, import contracts, and every test that starts no process (unit,
# static, golden vectors); a test that starts one anyway fails (tests/process_lane.py).
test-fast: bootstrap-test
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	$(KEEP_BYTECODE) .venv/bin/pytest --fast -q -p no:xdist

# Render the local network's chain spec twice in different environments, compare the bytes, and
# compare the genesis with the reviewed lock file.
determinism: bootstrap
	.venv/bin/ops-tools chainspec verify-determinism --network chainspec/networks/local.yml --node .venv/bin/devnode
	.venv/bin/ops-tools chainspec render --network chainspec/networks/local.yml --node .venv/bin/devnode --check

bench: bootstrap
	.venv/bin/python benchmarks/run.py
