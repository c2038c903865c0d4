# Two entry points, each sets up the virtualenv on first use (Python >= 3.11, pip, make).
#   make plan   - the offline plan of the dev stack (no credentials, no Pulumi CLI)
#   make test   - the test suite
VENV   ?= .venv
PYTHON ?= python3
STACK  ?= dev
BIN    := $(VENV)/bin

.PHONY: plan test bench setup
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

plan: $(VENV)/.installed
	$(BIN)/tpuplane plan --stack $(STACK)

test: $(VENV)/.installed
	$(BIN)/pytest -q

bench: $(VENV)/.installed
	$(BIN)/python bench/plan_scale.py
	$(BIN)/python bench/sidecar_check.py
	$(BIN)/python bench/local_sidecar.py
	$(BIN)/python bench/colocated.py
