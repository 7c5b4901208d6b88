# Graph Studio. Two commands matter: `make run` and `make test` (see README.md).
# Both work on a fresh Debian machine: they create .venv, install the project and
# the Debian packages they need, and are fast the second time.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

PORT ?= 8000
FAST ?=
ARGS ?=

VENV := .venv
PY := $(VENV)/bin/python
MANAGE := $(PY) manage.py

# Python 3.12+: the newest 3.12/3.13 under pyenv, else python3.13/python3.12 on PATH.
# Override with `make PYTHON=/path/to/python3.x ...`.
PYENV_ROOT_DIR := $(or $(shell pyenv root 2>/dev/null),$(PYENV_ROOT),$(HOME)/.pyenv)
ifneq ($(origin PYTHON),command line)
PYTHON := $(or \
  $(shell ls -d $(PYENV_ROOT_DIR)/versions/3.1[23].*/bin/python3.1[23] 2>/dev/null | sort -V | tail -n 1), \
  $(shell command -v python3.13 2>/dev/null), \
  $(shell command -v python3.12 2>/dev/null))
endif

# Reinstall only when pyproject.toml changes: the stamp's name is its content hash.
DEPS_STAMP := $(VENV)/.deps-$(shell sha256sum pyproject.toml | cut -c1-16)

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends

# Services the test suite talks to (.ci/services starts them when they are down).
ENGINE_TEST_PG_DSN ?= postgresql://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15

IN_CI := $(filter-out 0 false no,$(CI))
# FAST=1 skips browser and slow tests, locally only: CI always runs everything.
PYTEST_MARKERS := $(if $(and $(FAST),$(if $(IN_CI),,local)),-m "not browser and not slow")

.PHONY: help run test test-fast lint venv deps services apt-run apt-test bench

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  (PORT=8000 for run; FAST=1 for test skips browser/slow tests; ARGS='...' goes to pytest)"

run: deps apt-run  ## serve the studio on http://127.0.0.1:PORT (default 8000; embedded: SQLite, in-process)
	@$(MANAGE) migrate --noinput
	@$(MANAGE) seed_demo
	@echo
	@echo "  Graph Studio: http://127.0.0.1:$(PORT)/"
	@echo "  Demo logins:  requester / requester   (asks for purchases: /purchases/)"
	@echo "                demo / demo             (reviewer: /reviews/)"
	@echo "                senior / senior         (senior reviewer: second level above 50,000 CNY)"
	@echo
	@exec $(VENV)/bin/daphne -b 127.0.0.1 -p $(PORT) studio.asgi:application

test: deps apt-test services  ## ruff, import contracts, mypy (engine, studio), then the whole pytest suite
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	ENGINE_TEST_PG_DSN='$(ENGINE_TEST_PG_DSN)' TEST_REDIS_URL='$(TEST_REDIS_URL)' \
	  $(PY) -m pytest $(PYTEST_MARKERS) $(ARGS)

test-fast:  ## make test FAST=1: no browser or slow tests
	@$(MAKE) test FAST=1

lint: deps  ## ruff, import contracts and mypy only
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

venv:  ## create .venv with Python 3.12+ (recreated if it is older)
	@if ! $(PY) -c 'import sys; raise SystemExit(sys.version_info < (3, 12))' 2>/dev/null; then \
	  if [ -z "$(strip $(PYTHON))" ]; then \
	    echo "error: Python 3.12 or 3.13 not found (looked in $(PYENV_ROOT_DIR)/versions and on PATH)." >&2; \
	    echo "       Install one, or pass PYTHON=/path/to/python3.12." >&2; exit 1; \
	  fi; \
	  echo "Creating $(VENV) with $(strip $(PYTHON))"; \
	  rm -rf $(VENV); $(strip $(PYTHON)) -m venv $(VENV); \
	fi

deps: $(DEPS_STAMP)  ## install the project (editable) with its test extras into .venv

$(DEPS_STAMP): | venv
	$(PY) -m pip install --progress-bar off -q -e ".[test]"
	@rm -f $(VENV)/.deps-*
	@touch $@

bench: services  ## benchmarks: engine vs. LangGraph 1.2 as ratios (own venv .venv-bench; ARGS='engine_core --repeat 9')
	@bash benchmarks/run.sh $(ARGS)

services:  ## start PostgreSQL and Redis when down; create the test database
	@bash .ci/services

apt-run:  ## Debian packages the studio needs (graphviz's dot)
	@command -v dot >/dev/null || $(MAKE) _apt PACKAGES=graphviz

apt-test: apt-run  ## ... and the browser tests need (chromium)
	@[ -x /usr/bin/chromium ] || [ -n "$(PYTEST_MARKERS)" ] || $(MAKE) _apt PACKAGES=chromium

.PHONY: _apt
_apt:
	@echo "Installing Debian packages: $(PACKAGES)"
	@$(APT_INSTALL) $(PACKAGES) || { $(SUDO) apt-get update -q && $(APT_INSTALL) $(PACKAGES); }
