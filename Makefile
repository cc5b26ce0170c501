# naiad developer commands. `make serve` and `make test` are all a newcomer needs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PLUGINS := $(wildcard plugins/*)
STAMP := $(VENV)/.installed

EXAMPLE_SCRIPTS := $(wildcard plugins/*/examples/make_example.py)

.PHONY: setup examples serve test lint protos dist clean

setup: $(STAMP)

$(STAMP): pyproject.toml VERSION $(wildcard plugins/*/pyproject.toml)
	@if test -x $(BIN)/python; then echo "Updating $(VENV): a pyproject.toml or VERSION changed, or the last install did not finish."; else \
	  echo "Creating $(VENV) with naiad, every plugin and their frameworks (CPU PyTorch, ONNX Runtime, OpenVINO, XGBoost, transformers): about 2 GB, a few minutes, once."; \
	  $(PYTHON) -m venv $(VENV); fi
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]' $(foreach p,$(PLUGINS),-e '$(p)[test]')
	@touch $(STAMP)

# Framework example models are generated (never committed) by each plugin's script; one that is already
# there is kept as it is (delete its folder to generate it afresh).
examples: setup
	@$(foreach script,$(EXAMPLE_SCRIPTS),$(BIN)/python $(script) examples/model_repository &&) true

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

# A wheel and an sdist of the core and of every plugin, all at the version in VERSION, into dist/.
dist: setup
	@rm -rf dist
	@$(BIN)/python scripts/build_distributions.py --outdir dist . $(PLUGINS)

clean:
	rm -rf $(VENV) dist .mypy_cache .ruff_cache .pytest_cache
