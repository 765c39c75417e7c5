# Developer entry points. `make run ROOT=DIR` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ROOT   ?=
STAMP  := $(VENV)/.installed
# Every runtime, dev and build dependency at the exact version the suite passes with, with the hashes of all
# their files (any Linux, Python 3.11-3.13). `make lock` regenerates it.
LOCK   := requirements/lock.txt

.PHONY: help setup run check test lint format bench clean lock

# A fresh venv (--clear: a changed lock leaves nothing behind) holding exactly the locked versions: first the
# locked pip, setuptools and wheel, which then build what ships as source only (sdnotify) and ragd itself,
# editable, without an isolated build env fetching the newest setuptools. setuptools' "Editable installation"
# notice (its meta path finder for the agent/ and cli/ layout) is information only, not something to act on.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	awk '/^[^ #]/ { keep = $$1 ~ /^(pip|setuptools|wheel)==/ } keep' $(LOCK) >$(VENV)/bootstrap.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(VENV)/bootstrap.txt
	$(BIN)/python -m pip install --quiet --require-hashes --no-build-isolation -r $(LOCK)
	PYTHONWARNINGS='ignore:Editable installation' \
		$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

setup: $(STAMP)

help:
	@echo "make setup          .venv with exactly the locked versions (requirements/lock.txt)"
	@echo "make run ROOT=DIR   index DIR and serve it (MCP, web page)"
	@echo "make check          the fast lane: ruff, mypy, and the tests not marked slow (docs/testing.md)"
	@echo "make test           ruff, mypy and the whole suite (TEST_PROCS=4 processes; TEST_PROCS=0: one)"
	@echo "make lint           ruff check, ruff format --check, mypy"
	@echo "make format         format the code and apply ruff's fixes"
	@echo "make lock           re-resolve requirements/lock.txt after a change to the dependencies"
	@echo "make wheel | dist | dist-test | systest   the wheel; the frozen program and installer; their tests"

run: setup
	@if [ -z "$(ROOT)" ]; then \
		echo "make run: which folder should the agent index? Say it: make run ROOT=~/Documents" >&2; exit 2; fi
	@echo "connect an AI tool (Claude Desktop, Cursor, VS Code, Claude Code): $(abspath $(BIN))/ragctl mcp-config"
	@echo "see it in a browser: $(abspath $(BIN))/ragctl ui  (http://127.0.0.1:8739/ui/ with the default port)"
	$(BIN)/ragd run $(ROOT)

lint: setup
	$(BIN)/ruff check agent cli tests bench packaging
	$(BIN)/ruff format --check agent cli tests bench packaging
	$(BIN)/mypy

# The suite in TEST_PROCS processes (pytest-xdist), each test file in one of them: most tests wait on real agents
# and servers rather than on a CPU (a serial run kept 2 cores at a load of about 1; on 2 quiet cores 4 processes ran
# the suite in 9 min 10 s, 3 in 10 min 05 s). TEST_PROCS=0: one process.
# pytest exits 5 when it collected (or kept) no test: a failure here like any other.
TEST_PROCS ?= 4
PYTEST     := $(BIN)/python -m pytest $(if $(filter 0,$(TEST_PROCS)),,-n $(TEST_PROCS) --dist loadfile)
test: lint
	$(PYTEST)

# The fast lane (docs/testing.md): lint, types, and every test not marked slow (tests/conftest.py marks all of
# tests/e2e and the other tests it names), in a few minutes; `make test` runs everything.
check: lint
	$(PYTEST) -m "not slow"

format: setup
	$(BIN)/ruff format agent cli tests bench packaging
	$(BIN)/ruff check --fix agent cli tests bench packaging

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache

# Re-resolve $(LOCK) after a change to pyproject.toml's dependencies (or requirements/lock.in), keeping every
# other pin; `make lock UPGRADE=1` moves everything to the newest versions allowed. Then `make test`.
# uv resolves for every platform and Python version at once (pip-compile only for the running one); it trusts
# the system's certificates, as pip does. The lock is written back only if it changed (a new lock, a new venv).
UV_VERSION := 0.13.9
LOCK_VENV  := build/lock-venv
lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet 'uv==$(UV_VERSION)'
	cp $(LOCK) $(LOCK_VENV)/lock.txt
	$(LOCK_VENV)/bin/uv pip compile --quiet --system-certs --universal --python-version 3.11 --generate-hashes \
		--extra dev --extra build --extra milvus --custom-compile-command 'make lock' $(if $(UPGRADE),--upgrade) \
		pyproject.toml requirements/lock.in -o $(LOCK_VENV)/lock.txt
	cmp -s $(LOCK_VENV)/lock.txt $(LOCK) || cp $(LOCK_VENV)/lock.txt $(LOCK)

# The wheel (dist/ragd-<version>-py3-none-any.whl), for `pipx install` / `uv tool install`. setuptools would
# also ship files an earlier build left in build/lib.
.PHONY: wheel
wheel: setup
	rm -rf build/lib build/bdist.*
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -w dist .

# Frozen program + single-file installer (packaging/build.sh; the build extra, locked, is in the venv), and its
# build-and-smoke.
.PHONY: dist dist-test
dist: setup
	VENV=$(VENV) packaging/build.sh

dist-test: dist
	VENV=$(VENV) packaging/dist_test.sh --no-build

# The installer in a minimal Debian booted under a live systemd (systemd-nspawn), driven as an administrator would
# (packaging/systest.sh; root; the minimal root is made once with debootstrap and kept in /var/tmp/ragd-systest).
# NO_BUILD=1: test the installer already in dist/ (CI: the one `make dist-test` just built).
.PHONY: systest
systest: $(if $(filter 1,$(NO_BUILD)),setup,dist)
	VENV=$(VENV) packaging/systest.sh
