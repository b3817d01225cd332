# Every target builds .venv from pyproject.toml on first use: a clean clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
BSTAMP := $(VENV)/.installed-bench
# the engine's hot modules, compiled in place by mypyc (kestrel/engine/native.py lists them)
NATIVE := kestrel/engine/_native.json
NATIVE_SRC := $(wildcard kestrel/engine/*.py)  # (a superset of native.COMPILED: never stale)

.PHONY: demo test bench lint typecheck layers clean compile pure

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# a failed compile (no C compiler) leaves the engine pure Python: slower, the same ledgers
$(NATIVE): $(STAMP) $(NATIVE_SRC) tools/compile_engine.py
	$(PY) tools/compile_engine.py > $(VENV)/compile.log 2>&1 \
	  || { echo "make: the engine's compile failed (see $(VENV)/compile.log): running pure Python"; \
	       $(PY) tools/compile_engine.py --clean; echo '{}' > $(NATIVE); }

compile: $(STAMP)  # always rebuilds (after a failed compile too)
	$(PY) tools/compile_engine.py

pure:
	$(PYTHON) tools/compile_engine.py --clean

$(BSTAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BSTAMP)

demo: $(STAMP) $(NATIVE)
	$(VENV)/bin/kestrel simulate --checkpoints 11:00,13:30

test: $(STAMP) $(NATIVE)
	$(PY) -m pytest -q

bench: $(BSTAMP) $(NATIVE)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b --quick || exit 1; done

lint: typecheck layers

layers: $(STAMP)  # the package layers of pyproject.toml's [tool.importlinter]
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis build
	$(PYTHON) tools/compile_engine.py --clean
