# jaxlab: `make lab` sets up and starts JupyterLab; `make test` sets up and runs every check.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON  := $(shell tools/find_python.sh)
MINOR   := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
# JAX 0.12 needs 3.12; every newer Python installs from the 3.12 lock.
LOCK    := requirements/py$(if $(filter 3.11,$(MINOR)),3.11,3.12).txt
VENV    := .venv
PY311   := $(shell tools/find_python.sh 3.11)
VENV311 := .venv311
PORT    ?= 8888

.PHONY: help lab setup test lint unit docs py311 py311-env bench lock clean

help:
	@echo "make lab    set up .venv and start JupyterLab on notebooks/"
	@echo "make test   set up, lint and run the whole test suite, then build the docs"
	@echo "make docs   build the documentation site into docs/_build/html (offline)"
	@echo "make bench  run every benchmark in benchmarks/ and print its figures"

# One stamp per environment: rebuilt when its lock or pyproject.toml changes.
# Where Python may write bytecode, pip compiles none (half the install's time): each module
# is compiled when first imported, as Python does. Where it may not (PYTHONDONTWRITEBYTECODE
# set, as some images do), pip's compilation is the only bytecode there will be: import jax
# took 4.1 s instead of 1.0 without it.
PIP_COMPILE := $(if $(PYTHONDONTWRITEBYTECODE),,--no-compile)
# (jaxlab's own install compiles key tracking's optional C part, keys/_hot.c, when it can.)
$(VENV)/.stamp: $(LOCK) pyproject.toml kernel_ext/keys/_hot.c
	@test -n "$(PYTHON)" || { echo "jaxlab needs python3.12, or python3 >= 3.11" >&2; exit 1; }
	@echo "jaxlab: environment $(VENV) on Python $(MINOR) from $(LOCK)"
	@tools/ensure_system.sh venv $(PYTHON)
	@tools/ensure_system.sh compiler $(PYTHON) || true
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q $(PIP_COMPILE) -r $(LOCK)
	@mkdir -p build
	flock build/.editable.lock $(VENV)/bin/python -m pip install -q --no-deps -e .
	@touch $@

# Kernels load jaxlab, and the lab's server enables jaxlab_server (an untrusted notebook
# opens without its saved widget state, which JupyterLab would restore and run): written
# again when tools/kernel_config.py changes, not only when the environment is rebuilt (an
# old config kept "already loaded" in every notebook).
$(VENV)/.kernel-config: tools/kernel_config.py $(VENV)/.stamp
	$(VENV)/bin/python tools/kernel_config.py
	@touch $@

$(VENV311)/.stamp: requirements/py3.11.txt pyproject.toml kernel_ext/keys/_hot.c
	@tools/ensure_system.sh venv $(PY311)
	@tools/ensure_system.sh compiler $(PY311) || true
	$(PY311) -m venv $(VENV311)
	$(VENV311)/bin/python -m pip install -q --upgrade pip
	$(VENV311)/bin/python -m pip install -q $(PIP_COMPILE) -r requirements/py3.11.txt
	@mkdir -p build
	flock build/.editable.lock $(VENV311)/bin/python -m pip install -q --no-deps -e .
	@touch $@

setup: $(VENV)/.stamp $(VENV)/.kernel-config
	@tools/ensure_system.sh dot

lab: setup
	@echo "jaxlab: starting JupyterLab on notebooks/ (the URL with its token follows)"
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --port=$(PORT) --no-browser \
	  $(if $(filter 0,$(shell id -u)),--allow-root,)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

unit: setup
	@tools/ensure_system.sh chromium
	$(VENV)/bin/python -m pytest --durations=25

# The site, offline, warnings as errors. Alone it executes the tutorials; in `make test` the
# notebook test has executed them already and saved the copies the docs then take. The
# check reads each tutorial in Chromium at 1280x720 (about 2 s a page).
DOCS_HTML := docs/_build/html
docs: setup
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs $(DOCS_HTML)
	@tools/ensure_system.sh chromium
	$(VENV)/bin/python docs/check_site.py $(DOCS_HTML)

# The quicker second run: unit and magic tests on Python 3.11 with its own lock, each
# parametrized test's first case (tests/one_case.py: the same code paths on JAX 0.10).
SECOND_RUN := $(if $(PY311),$(if $(filter 3.11,$(MINOR)),,yes),)
py311: py311-env
	@if [ -n "$(SECOND_RUN)" ]; then \
	  JAXLAB_TEST_ONE_CASE=1 $(VENV311)/bin/python -m pytest \
	    -m "not browser and not notebooks and not slow" -q -p no:cacheprovider; \
	else echo "jaxlab: no separate Python 3.11 run (python3.11 absent, or it is the main one)"; fi

py311-env:
	@if [ -n "$(SECOND_RUN)" ]; then $(MAKE) --no-print-directory $(VENV311)/.stamp; fi

# Each notebook runs once: tests/test_notebooks.py saves the executed copies here for docs.
# tools/test_lanes.sh starts the 3.11 lane (its environment, then its run) while it builds
# this environment, then runs two lanes beside it: the 3.12 suite; the browser tests, then
# the docs, the lint and the 3.12 suite's files from its end (the two runs share the files
# as they go: tests/claims.py). It fails when any of them failed.
# System packages are installed first, in the foreground (two apt-gets would fight over
# dpkg's lock), and the two environments' editable installs of jaxlab take turns (one
# build/ and egg-info).
# (Four lanes, the notebooks apart from the units, took longer from a fresh clone, 1,683 s
# against 1,534: the two cores are busy throughout either way.)
# Python keeps the bytecode it compiles (an empty PYTHONDONTWRITEBYTECODE is unset): with it
# set, as some images do, each lane's pytest compiled and rewrote the 231 test modules
# again (collection 25 s, against 18 s), and each kernel jaxlab's modules.
test: export JAXLAB_EXECUTED_NOTEBOOKS := test-output/notebooks
test: export PYTHONDONTWRITEBYTECODE :=
test:
	@test -n "$(PYTHON)" || { echo "jaxlab needs python3.12, or python3 >= 3.11" >&2; exit 1; }
	@tools/ensure_system.sh venv $(PYTHON)
	@tools/ensure_system.sh compiler $(PYTHON) || true
	@if [ -n "$(SECOND_RUN)" ]; then tools/ensure_system.sh venv $(PY311); \
	  tools/ensure_system.sh compiler $(PY311) || true; fi
	@tools/ensure_system.sh dot
	@tools/ensure_system.sh chromium
	@MAKE="$(MAKE)" tools/test_lanes.sh $(VENV)

# Every benchmark (or those BENCHES names) runs to its end, each saving its output under
# test-output/bench/; then one table of every target (figure, independent reference,
# ratio, target, PASS/FAIL, load) is printed and written to test-output/bench.json, which
# `tools/bench_table.py --compare OLD.json NEW.json` compares across commits. Fails when
# any target failed or a benchmark exited non-zero.
BENCHES ?= $(filter-out benchmarks/_%,$(wildcard benchmarks/*.py))
bench: setup
	@mkdir -p test-output/bench; rm -f test-output/bench/*.log; \
	for f in $(BENCHES); do log=test-output/bench/$$(basename $$f .py).log; echo "== $$f"; \
	  $(VENV)/bin/python $$f 2>&1 | tee $$log | grep -v '^BENCH {'; \
	  echo "EXIT $${PIPESTATUS[0]}" >> $$log; done; \
	echo "== table"; \
	$(VENV)/bin/python tools/bench_table.py test-output/bench/*.log --json test-output/bench.json

# Regenerate both locks from requirements/deps.in (needs network to PyPI).
lock: setup
	$(VENV)/bin/python -m pip install -q uv
	for v in 3.11 3.12; do $(VENV)/bin/uv pip compile --quiet --python-version $$v \
	  --python-platform x86_64-unknown-linux-gnu requirements/deps.in -o requirements/py$$v.txt; done

clean:
	rm -rf $(VENV) $(VENV311) .pytest_cache .ruff_cache .mypy_cache build *.egg-info
