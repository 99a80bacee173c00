# Trajlab: `make demo` starts the platform with a demo; `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.trajlab-installed
HOST ?= 127.0.0.1
PORT ?= 8000

# The test suite runs the production mode: PostgreSQL, Redis and a real Celery worker.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/trajlab
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15
TEST_ENV = DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) TRAJLAB_VAR_DIR=$(CURDIR)/var/test \
	DJANGO_SECRET_KEY=test-only-secret-key
PYTEST_ARGS ?=

.PHONY: demo test bench serve venv lock lint clean

$(STAMP): pyproject.toml requirements/lock.txt requirements/constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --disable-pip-version-check -q -c requirements/constraints.txt -r requirements/lock.txt
	SAM2_BUILD_CUDA=0 $(PIP) install --disable-pip-version-check -q --no-build-isolation --no-deps \
		-c requirements/constraints.txt sam2==1.1.0
	touch $@

venv: $(STAMP)

## Embedded mode: SQLite, a filesystem broker, the web server and one worker, demo data loaded.
demo: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo --queue
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Serve without rebuilding the demo.
serve: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Every test, against PostgreSQL and Redis (see .ci/run for starting them).
test: venv
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

## Benchmarks at full size; figures go to var/bench/*.json.
bench: venv
	$(TEST_ENV) TRAJLAB_BENCH_FULL=1 $(PY) -m pytest -q -s -p no:cacheprovider tests/benchmarks

lint: venv
	$(VENV)/bin/ruff check .

lock: venv
	{ sed -n '1,3p' requirements/lock.txt; $(PIP) freeze | grep -v -e '^sam2==' -e '^-e'; } > requirements/lock.new
	mv requirements/lock.new requirements/lock.txt

clean:
	rm -rf var/test var/bench
