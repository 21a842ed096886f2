# The README's two commands: `make demo` (set up + run the main job) and `make test` (set up + run the tests).
# Both create .venv on first use and reinstall only when pyproject.toml or constraints.txt change.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup demo test clean

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python scripts/demo.py

test: $(STAMP)
	$(VENV)/bin/python scripts/run_tests.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
