# Atrium: `make run` starts the whole app on embedded defaults; `make test` runs the suite.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt 2>/dev/null | sha1sum | cut -c1-12)

# Python caches bytecode (its default; an environment may turn that off with
# PYTHONDONTWRITEBYTECODE): a test run starts a few hundred Python processes (live servers,
# workers, `manage.py` commands), each compiling the project's ~200 modules otherwise, and
# every pytest worker would rewrite the test modules anew (docs/testing.md, "Bytecode").
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-production lint format bench install browser nginx mcp-servers fleet clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,bench]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

# Real Chromium from Debian for the browser tests (never a downloaded browser).
browser:
	@command -v chromium >/dev/null || { \
	  echo "Installing Debian chromium for the browser tests..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Debian's nginx for the fleet (`make fleet`, tests/fleet): the load balancer in front of the
# web processes. Run as a child of scripts/fleet.sh, never as the system service.
nginx:
	@command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { \
	  echo "Installing Debian nginx for the fleet..."; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq nginx >/dev/null; }

# Third-party MCP servers from npm (into tools/mcp-servers/node_modules, git-ignored), and
# the MCP conformance suite with its Node 22 (tools/conformance; tests/conformance).
mcp-servers:
	@bash tools/install-mcp-servers.sh
	@bash tools/install-conformance.sh
	@bash tools/install-compat-venvs.sh  # third-party Python SDKs, one venv each (tests/compat)

run: $(STAMP)
	@bash scripts/run.sh

# Two pytest-xdist workers: the tests without Chromium in one, the real-Chromium tests in
# the other (tests/conftest.py, worker_group; docs/testing.md). PYTEST_PARALLEL= runs one.
PYTEST_PARALLEL ?= -n 2

test: $(STAMP) browser nginx mcp-servers
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_function_imports.py
	$(BIN)/pytest --durations=25 $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# Production on one machine: nginx in front of 3 web processes, 2 Celery workers and beat on
# PostgreSQL + Redis (docs/fleet.md). Ctrl-C stops it.
fleet: $(STAMP) nginx mcp-servers
	@bash scripts/fleet.sh

# The same suite against PostgreSQL + Redis (channel layer and broker) on loopback.
test-production: $(STAMP)
	@bash scripts/with-production-services.sh $(MAKE) test

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_function_imports.py

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP) nginx mcp-servers
	$(BIN)/python -m bench

clean:
	rm -rf var test-artifacts .pytest_cache
