# Two commands do all the set-up on a fresh machine with only python3:
#   make demo   trains the example model and prints its test accuracy
#   make test   runs the whole test suite against torch as the oracle
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(VENV)/.base: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.demo: $(VENV)/.base
	$(PY) -m pip install -q -e '.[demo]'
	touch $@

$(VENV)/.test: $(VENV)/.base
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/.demo
	$(PY) examples/digits_demo.py

test: $(VENV)/.test
	$(PY) -m ruff check flowgrad tests benchmarks examples
	$(PY) -m pytest -n 2

lint: $(VENV)/.test
	$(PY) -m ruff check flowgrad tests benchmarks examples

bench: $(VENV)/.test $(VENV)/.demo  # the training benchmark reads the digits data
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV)
