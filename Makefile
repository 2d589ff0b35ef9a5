# make demo   set everything up, then run the main job on its embedded defaults
# make test   set everything up, then run the linters and every test
# Both are idempotent: what a previous run built (packages, venv, images) is reused.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The venv is rebuilt only when the pinned requirements or the package metadata change.
VENV_STAMP := $(VENV)/.stamp-$(shell cat requirements.txt pyproject.toml | sha256sum | cut -c1-16)
CARGO ?= $(shell command -v cargo || echo $(HOME)/.cargo/bin/cargo)
GARAGE_VERSION := 2.5.0
GARAGE := build/garage-$(GARAGE_VERSION)/bin/garage

.PHONY: setup system venv images demo test test-versions lint unit integration faults mutation bench bench-celery bench-mssql-pages bench-s3 bench-s3-restore bench-reports clean reap

setup: system venv images

system:
	@bash scripts/install-system-deps.sh

venv: $(VENV_STAMP)

$(VENV_STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	@rm -f $(VENV)/.stamp-*
	@touch $@

# The build context ships in the package (verification/images/), so an installed restoreproof has it too.
images:
	@bash verification/images/build.sh

demo: setup
	$(BIN)/restoreproof nightly

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit

integration: setup
	$(BIN)/pytest tests/integration

# Real faults made on copies of real backups, one test each (also part of `make test`).
faults: setup
	$(BIN)/pytest -m faults tests/faults -v

test: setup lint
	$(BIN)/pytest

# Every supported PostgreSQL major (verification/images/postgres/SUITES) end to end: a repository written by
# each major's image (plain, bundled and block incremental where its pgBackRest has them) verified to
# "passed"; `make test` runs the oldest, 15 and the newest only. Builds each major's image if missing.
test-versions: setup
	RESTOREPROOF_TEST_PG_VERSIONS=all $(BIN)/pytest tests/integration/test_version_matrix.py -v

# Mutation testing of the verdict path (modules in pyproject's [tool.mutmut]); not part of
# `make test` (it runs the unit tests once per mutant). Prints the score per module.
mutation: venv
	rm -rf mutants
	$(BIN)/mutmut run || true
	$(BIN)/python scripts/mutation_report.py --min-score 90

bench: setup
	$(BIN)/python bench/e2e_postgres.py

# The nightly DAG on Airflow's CeleryExecutor with one worker and with two (and the LocalExecutor for
# reference): real processes (Redis, PostgreSQL, the scheduler, workers), a demo repository of 4 stanzas.
bench-celery: setup
	$(BIN)/python bench/airflow_celery.py --repeat 3

# Offline SQL Server page verification against a plain read (no Docker: a venv is enough).
bench-mssql-pages: venv
	$(BIN)/python bench/mssql_pages.py

# The S3 source's catalogue on 10,000 objects in a local S3 endpoint, moto's (the tests') and Garage's
# (no Docker: a venv, and cargo to build Garage once).
bench-s3: venv $(GARAGE)
	$(BIN)/python bench/s3_catalog.py --garage $(GARAGE)

# Garage (an S3 store in Rust, from crates.io) for the S3 benches, built once into build/ (ignored, never
# committed): 22 min of CPU, 34 min on a busy 2-core machine. Its version is also GARAGE_VERSION in
# bench/s3_endpoints.py.
$(GARAGE):
	$(CARGO) install --locked --quiet garage --version $(GARAGE_VERSION) --root build/garage-$(GARAGE_VERSION)

# A verification from S3 in stage mode against the folder's plus a plain download, and staging against
# a plain download (a demo repository at scale 1 in a local S3 endpoint; Docker for the restores).
bench-s3-restore: setup
	$(BIN)/python bench/s3_restore.py --repeat 5

# report.html's size, and index.html and the Airflow page's handler over 10,000 runs recorded through the
# results store's API, against reading every report.json as before (no Docker: a venv is enough).
bench-reports: venv
	$(BIN)/python bench/reports.py

reap: venv
	$(BIN)/restoreproof reap

clean: reap
	rm -rf demo reports test-artifacts mutants
