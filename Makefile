# The README's two commands: `make demo` (set up + run the main job) and `make test` (set up + run the tests).
# Both create .venv on first use and reinstall only when pyproject.toml or constraints.txt change.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup demo test clean agents

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tao demo

test: $(STAMP) agents
	$(VENV)/bin/python scripts/run_tests.py $(PYTEST_ARGS)

# Real agent CLIs for the end-to-end tests, pinned; npm/pip run only when the installed version differs.
# mini-SWE-agent gets its own virtualenv so its dependencies never touch the project's .venv.
AGENTS := .tools/agents
MINI := .tools/mini
CLAUDE_CODE_VERSION := 2.1.328
OPENCODE_VERSION := 1.18.33
MINI_SWE_AGENT_VERSION := 2.4.6

agents:
	@installed=$$(node -p "require('./$(AGENTS)/node_modules/@anthropic-ai/claude-code/package.json').version" 2>/dev/null); \
	if [ "$$installed" = "$(CLAUDE_CODE_VERSION)" ]; then echo "claude-code $$installed already installed"; \
	else npm install --prefix $(AGENTS) --no-audit --no-fund @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION); fi
	@installed=$$(node -p "require('./$(AGENTS)/node_modules/opencode-ai/package.json').version" 2>/dev/null); \
	if [ "$$installed" = "$(OPENCODE_VERSION)" ]; then echo "opencode-ai $$installed already installed"; \
	else npm install --prefix $(AGENTS) --no-audit --no-fund opencode-ai@$(OPENCODE_VERSION); fi
	@installed=$$($(MINI)/bin/python -c "import importlib.metadata as m; print(m.version('mini-swe-agent'))" 2>/dev/null); \
	if [ "$$installed" = "$(MINI_SWE_AGENT_VERSION)" ]; then echo "mini-swe-agent $$installed already installed"; \
	else test -x $(MINI)/bin/python || $(PYTHON) -m venv $(MINI); \
	$(MINI)/bin/python -m pip install --quiet mini-swe-agent==$(MINI_SWE_AGENT_VERSION); fi

clean:
	rm -rf $(VENV) build *.egg-info
