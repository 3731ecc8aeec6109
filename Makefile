# Two entry points for a fresh clone: `make demo` and `make test`.
# Each creates .venv in the repository root when missing and installs what it needs.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip

.PHONY: demo test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e '.[onnx,torch,fast]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -q -e '.[test]'
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(BIN)/python examples/demo.py

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/mypy ge

test: $(VENV)/.test-installed lint
	$(BIN)/python -m pytest -n 2 -q

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
