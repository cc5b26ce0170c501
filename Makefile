# naiad developer commands. `make serve` and `make test` are all a newcomer needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(wildcard plugins/*)
STAMP := $(VENV)/.installed

.PHONY: setup serve test lint typecheck protos clean

setup: $(STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' $(foreach p,$(PLUGINS),-e '$(p)[test]')
	touch $(STAMP)

serve: setup
	$(BIN)/naiad serve --model-repository examples/model_repository

test: setup
	$(BIN)/python -m pytest tests $(PLUGINS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

protos: setup
	$(BIN)/python scripts/generate_protos.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
