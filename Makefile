# Developer entry points. `make run ROOT=DIR` and `make test` are the README's two commands.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ROOT   ?=
STAMP  := $(VENV)/.installed

.PHONY: setup run test lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	@if [ -z "$(ROOT)" ]; then \
		echo "make run: which folder should the agent index? Say it: make run ROOT=~/Documents" >&2; exit 2; fi
	$(BIN)/ragd run $(ROOT)

lint: setup
	$(BIN)/ruff check agent cli tests bench packaging
	$(BIN)/ruff format --check agent cli tests bench packaging
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

format: setup
	$(BIN)/ruff format agent cli tests bench packaging
	$(BIN)/ruff check --fix agent cli tests bench packaging

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache

# Frozen program + single-file installer (packaging/build.sh; needs the build extra), and its build-and-smoke.
.PHONY: dist dist-test
dist: setup
	test -x $(BIN)/pyinstaller || $(BIN)/python -m pip install --quiet -e '.[build]'
	VENV=$(VENV) packaging/build.sh

dist-test: dist
	VENV=$(VENV) packaging/dist_test.sh --no-build
