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
	# --no-compile: pip byte-compiles one file at a time, a third of the set-up's time; the last
	# line below compiles the environment on every core instead.
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile torch==2.13.0
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -r requirements-test.txt
	# The project itself, editable (its files stay where they are, so edits are live and DVC sees
	# them): every process of the environment imports `bert`, whatever folder it starts in (a Dask
	# scheduler or worker started by its own command, dask-mpi, torchrun's ranks, a notebook).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	# As pip would, skipping a file written for another Python (torch ships one for 3.12 only).
	$(BIN)/python -c "import compileall, sysconfig; paths = sysconfig.get_paths(); \
		[compileall.compile_dir(d, quiet=2, workers=0) for d in {paths['purelib'], paths['platlib']}]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dvc repro
	@$(BIN)/python -m scripts.summary

# Two workers, each running whole files (a file's module fixtures are built once): the suite is
# mostly single-threaded processes, so the second core halves the wall time. Files start in
# tests/conftest.py's order, longest first; xdist's own reorder (files with the most tests first)
# would start test_workflow.py, 7 tests and a quarter of the suite's time, last.
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=20

# The project's bytecode, written once: the suite starts hundreds of stage processes, and where
# PYTHONDONTWRITEBYTECODE is set (CI's machines) each would compile the modules it imports anew.
COMPILE := $(BIN)/python -m compileall -q -j 0 bert stages scripts sample_world bench

test: $(STAMP) lint
	$(COMPILE)
	$(PYTEST)

# The input-boundary fuzz tests with the long hypothesis profile (thousands of mutated files per
# door, random): for hardening the readers; make test runs the quick profile.
fuzz: $(STAMP)
	BERT_FUZZ=long $(BIN)/python -m pytest -q -n 2 tests/test_fuzz_inputs.py

test-fast: $(STAMP) lint
	$(COMPILE)
	$(PYTEST) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check bert stages tests bench sample_world scripts
	$(BIN)/ruff format --check bert stages tests bench sample_world scripts

sample: $(STAMP)
	$(BIN)/python -m sample_world --out data/sample --seed 0
