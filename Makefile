# Set-up and everyday commands. `make run` and `make test` are the README's quick start.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
TASK   ?= obtain diamond
ARGS   ?=
# A CPU build of torch is pinned first: an unpinned torch pulls several GB of CUDA packages.
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.rlgpt-installed

.PHONY: setup system-deps run lint test test-fast test-unprivileged draw bench clean

setup: $(STAMP) system-deps

# bubblewrap gives the sandbox its namespaces (docs/security.md); as root it is installed, otherwise
# agent code runs with the other layers and the run says which one is missing.
system-deps:
	@command -v bwrap >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "note: install bubblewrap (bwrap) to run agent code in namespaces (docs/security.md)"; fi; }

$(STAMP): pyproject.toml
	@command -v python3 >/dev/null || { echo "python3 (3.10 or newer) is required"; exit 1; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH)"
	$(PIP) install -q -e '.[dev]'
	touch $(STAMP)

# The main job on its embedded defaults: Crafter and the offline rule-based expert (no network, no key).
run: setup
	$(PY) -m graph.run "$(TASK)" $(ARGS)

# ruff (pyflakes, pycodestyle, isort, bugbear, pyupgrade), mypy, and the layer contracts (pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# Lint, the whole suite including the integration test against a local llama.cpp server (built once),
# then the sandbox's tests again as the unprivileged user nobody (when run as root, as in CI).
test: lint
	bash .ci/install_llm.sh $(VENV)
	$(PY) -m pytest -q $(ARGS)
	bash .ci/test_unprivileged.sh

test-unprivileged: setup
	bash .ci/test_unprivileged.sh $(ARGS)

# Everything but the real-LLM integration test (no llama.cpp build).
test-fast: setup
	$(PY) -m pytest -q -m "not llm" $(ARGS)

draw: setup
	$(PY) -m graph.draw

bench: setup
	$(PY) benchmarks/env_throughput.py
	$(PY) benchmarks/ppo_throughput.py

clean:
	rm -rf $(VENV) .pytest_cache
