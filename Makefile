# Two commands on a fresh machine: `make demo` and `make test`. Both create (or reuse) .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The stamp changes when a requirements file (or this Makefile) changes, so a second run reuses the environment.
STAMP := $(VENV)/.installed
# Stage commands in dvc.yaml say `python`: it must be the environment's python.
export PATH := $(abspath $(BIN)):$(PATH)
export VIRTUAL_ENV := $(abspath $(VENV))

.PHONY: demo test test-fast fuzz lint sample clean-demo help

help:
	@echo "make demo       set up .venv, run the whole DVC pipeline on the bundled sample world (CPU, minutes)"
	@echo "make test       set up .venv with test extras, lint, run the test suite (slow tests included)"
	@echo "make test-fast  the test suite without the slow end-to-end tests"
	@echo "make fuzz       the input-boundary fuzz tests, long profile (thousands of mutated files per door)"
	@echo "make sample     regenerate the bundled sample world in data/sample (deterministic)"

$(STAMP): requirements.txt requirements-test.txt pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: the CPU wheel where that is what is on offer, the CUDA one elsewhere.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-test.txt
	# The project itself, editable (its files stay where they are, so edits are live and DVC sees
	# them): every process of the environment imports `bert`, whatever folder it starts in (a Dask
	# scheduler or worker started by its own command, dask-mpi, torchrun's ranks, a notebook).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dvc repro
	@$(BIN)/python -m scripts.summary

# Two workers, each running whole files (a file's module fixtures are built once): the suite is
# mostly single-threaded processes, so the second core halves the wall time.
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=20

test: $(STAMP) lint
	$(PYTEST)

# The input-boundary fuzz tests with the long hypothesis profile (thousands of mutated files per
# door, random): for hardening the readers; make test runs the quick profile.
fuzz: $(STAMP)
	BERT_FUZZ=long $(BIN)/python -m pytest -q -n 2 tests/test_fuzz_inputs.py

test-fast: $(STAMP) lint
	$(PYTEST) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check bert stages tests bench sample_world scripts
	$(BIN)/ruff format --check bert stages tests bench sample_world scripts

sample: $(STAMP)
	$(BIN)/python -m sample_world --out data/sample --seed 0
