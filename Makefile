# Set-up and everyday commands. `make run` and `make test` are the README's quick start.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
TASK   ?= obtain diamond
ARGS   ?=
# A CPU build of torch is pinned first: an unpinned torch pulls several GB of CUDA packages.
TORCH  ?= torch==2.13.0
STAMP  := $(VENV)/.rlgpt-installed

.PHONY: setup run test test-fast draw bench clean

setup: $(STAMP)

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

# The whole suite, including the integration test against a local llama.cpp server (built once).
test: setup
	bash .ci/install_llm.sh $(VENV)
	$(PY) -m pytest -q $(ARGS)

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
