# naiad developer commands. `make serve` and `make test` are all a newcomer needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(wildcard plugins/*)
STAMP := $(VENV)/.installed

EXAMPLE_SCRIPTS := $(wildcard plugins/*/examples/make_example.py)

.PHONY: setup examples serve test lint protos clean

setup: $(STAMP)

$(STAMP): pyproject.toml $(wildcard plugins/*/pyproject.toml)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]' $(foreach p,$(PLUGINS),-e '$(p)[test]')
	touch $(STAMP)

# Framework example models are generated (never committed) by each plugin's script.
examples: setup
	$(foreach script,$(EXAMPLE_SCRIPTS),$(BIN)/python $(script) examples/model_repository &&) true

serve: examples
	$(BIN)/naiad serve --model-repository examples/model_repository

test: setup
	$(BIN)/python -m pytest tests $(PLUGINS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(foreach p,$(PLUGINS),(cd $(p) && ../../$(BIN)/mypy) &&) true
	$(BIN)/python scripts/generate_protos.py --check

protos: setup
	$(BIN)/python scripts/generate_protos.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
