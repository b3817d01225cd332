# Every target builds .venv from pyproject.toml on first use: a clean clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
BSTAMP := $(VENV)/.installed-bench

.PHONY: demo test bench lint typecheck layers clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(BSTAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BSTAMP)

demo: $(STAMP)
	$(VENV)/bin/kestrel simulate --checkpoints 11:00,13:30

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(BSTAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b --quick || exit 1; done

lint: typecheck layers

layers: $(STAMP)  # the package layers of pyproject.toml's [tool.importlinter]
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis build
