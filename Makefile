# Every target installs what it needs: a fresh clone runs `make test` or `make demo`
# with nothing but python3, node and npm on the machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
EMULATORS := consumer/cli/emulators
NODE_STAMP := $(EMULATORS)/node_modules/.installed
PYTEST_ARGS ?=

.PHONY: install lock emulators demo chaos test test-deep test-profile coverage-check test-fast soak lint format bench spark-package s3a-jars validate-deploy image-check clean

install: $(PY_STAMP) $(NODE_STAMP)

# pyproject.toml gives compatible ranges (a library's); constraints.txt the exact set
# every install of this repository uses: this venv, CI and the images.
$(PY_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,local,spark,compose]'
	touch $@

## constraints.txt again from pyproject.toml's ranges: the newest versions the registry
## holds, resolved in a fresh venv (then run `make test` on them before committing).
LOCK_VENV := .cache/lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check '.[dev,local,spark,compose]'
	{ sed -n '/^#/p' constraints.txt; $(LOCK_VENV)/bin/pip freeze --exclude-editable --all \
	  | grep -v -i -E '^(kinesis-lander|pip)[= ]'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(LOCK_VENV)

$(NODE_STAMP): $(EMULATORS)/package.json $(EMULATORS)/package-lock.json
	cd $(EMULATORS) && npm ci --omit=optional --no-audit --no-fund
	touch $@

emulators: $(NODE_STAMP)

## The whole pipeline on the embedded local stack, ending in a reconciled report
## (`make demo DEMO_ARGS="--records 50000"` for a bigger run; see `lander demo --help`).
DEMO_ARGS ?=
demo: install
	$(BIN)/lander demo $(DEMO_ARGS)

## The tests, in two tiers (docs/development.md), spread over TEST_WORKERS processes
## (pytest-xdist; the Spark tests share one worker and its JVM). `make test`, the README's
## command: every unit, property and contract test and one end-to-end test of each
## capability, none slower than 20 s (a slower one fails the run: mark it deep), with
## branch coverage of consumer/ and sparkjobs/ printed at the end (worker processes the
## tests start are not measured). `make test-deep`: the rest (the chaos matrix, each
## scenario in every mode, long process and Spark runs); its coverage figure is both
## tiers' together, when `make test` ran first. Each prints its 25 slowest tests, and
## `make test-profile` every test's time and CPU.
TEST_WORKERS ?= 3
XDIST = -n $(TEST_WORKERS) --dist loadgroup
test: install
	@echo "make test: the fast tier on $(TEST_WORKERS) workers (the install above is not counted)"
	$(BIN)/python -m pytest $(XDIST) --tier fast --cov --cov-report=term --durations=25 $(PYTEST_ARGS)

test-deep: install
	$(BIN)/python -m pytest $(XDIST) --tier deep --cov --cov-append --cov-report=term --durations=25 $(PYTEST_ARGS)

## Both tiers' coverage together (after `make test` and `make test-deep`), held at 85 %.
COVERAGE_FLOOR ?= 85.0
coverage-check: $(PY_STAMP)
	$(BIN)/coverage report --fail-under=$(COVERAGE_FLOOR) | tail -n 1

## Every test (both tiers) with its wall time and CPU, one worker, no coverage: the 30
## dearest and the totals by file and marker (.cache/test-profile.jsonl keeps the rows).
test-profile: install
	$(BIN)/python -m pytest -p tests.support.profile --tier all -q $(PYTEST_ARGS); \
	status=$$?; $(BIN)/python -m tests.support.profile .cache/test-profile.jsonl; exit $$status

## Only the tests that need no emulator, no Spark JVM and start no process; starting
## one fails the test (TEST_FAST_NO_PROCESSES, see tests/conftest.py).
test-fast: $(PY_STAMP)
	TEST_FAST_NO_PROCESSES=1 $(BIN)/python -m pytest -m 'not emulator and not processes and not spark' $(PYTEST_ARGS)

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
