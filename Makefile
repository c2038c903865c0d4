# Two entry points, each sets up what it needs on first use (Python >= 3.11, pip, make).
#   make plan   - the offline plan of the dev stack (no credentials, no Pulumi CLI)
#   make test   - the test suite (also installs Debian's Chromium for the HTML report test, when run as root, and
#                 Mermaid from npm for the test that PR comments' diagrams parse)
#   make e2e    - the e2e tier on a real control plane (tpuplane sandbox); its first run builds the sandbox's
#                 toolchain from the Go modules pinned in sandbox/toolchain (needs Go 1.26; cached by pin)
VENV   ?= .venv
PYTHON ?= python3
STACK  ?= dev
BIN    := $(VENV)/bin

MERMAID := tests/mermaid/node_modules/mermaid/dist/mermaid.min.js

.PHONY: plan test e2e bench setup browser mermaid
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The HTML report is checked in a real browser: Debian's chromium, installed once (apt needs root).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium not found: install Debian's chromium package to run the HTML report test"; fi; }

# Mermaid's own parser checks the diagrams of plan and diff PR comments, in the same Chromium: the version pinned in
# tests/mermaid/package-lock.json, installed there by npm (skipped with a note when npm is missing).
mermaid: $(MERMAID)

$(MERMAID): tests/mermaid/package.json tests/mermaid/package-lock.json
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/mermaid --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: install Debian's npm to run the Mermaid diagram test"; fi

plan: $(VENV)/.installed
	$(BIN)/tpuplane plan --stack $(STACK)

test: $(VENV)/.installed browser mermaid
	$(BIN)/pytest -q -n 2

e2e: $(VENV)/.installed
	$(BIN)/tpuplane sandbox build
	$(BIN)/pytest -q -n 2 --dist loadgroup --e2e tests/e2e

bench: $(VENV)/.installed
	$(BIN)/python bench/plan_speed.py
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/hostile_sizes.py
	$(BIN)/python bench/sidecar_check.py
	$(BIN)/python bench/local_sidecar.py
	$(BIN)/python bench/colocated.py
	$(BIN)/python bench/sandbox.py
