# The two entry points README.md promises; both set up the machine first.
.PHONY: bootstrap up down test lint bench

bootstrap:
	@scripts/bootstrap

up: bootstrap
	.venv/bin/ops-tools localnet up

down: bootstrap
	.venv/bin/ops-tools localnet down

test: bootstrap
	.venv/bin/ruff check .
	.venv/bin/pytest

bench: bootstrap
	.venv/bin/python benchmarks/run.py
