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

# The system packages come first: pygraphviz (the draw extra) compiles against libgraphviz-dev.
setup: system-deps $(STAMP)

# bubblewrap gives the sandbox its namespaces (docs/security.md); graphviz, libgraphviz-dev (and
# Python's headers) let pygraphviz build and `python -m graph.draw` draw with Graphviz. As root they are
# installed; otherwise a note says what to install (agent code then runs with the other sandbox layers).
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v dot >/dev/null || missing="$$missing graphviz"; \
	[ -f /usr/include/graphviz/cgraph.h ] || missing="$$missing libgraphviz-dev"; \
	python3 -c 'import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
	  2>/dev/null || missing="$$missing python3-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note: install the system packages$$missing (apt-get install -y$$missing): bubblewrap runs agent" \
	            "code in namespaces (docs/security.md), the others build pygraphviz"; fi; \
	fi

# order-only: the system packages are in place before pip builds pygraphviz, even under make -j
$(STAMP): pyproject.toml Makefile | system-deps
	@command -v python3 >/dev/null || { echo "python3 (3.10 or newer) is required"; exit 1; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH)"
	$(PIP) install -q -e '.[dev,ray]'
	@# the draw extra compiles against Graphviz: without its system packages `make run` still works (the
	@# drawings fall back to matplotlib), and `make test`, which tests the Graphviz drawing, says what to install
	$(PIP) install -q -e '.[draw]' || echo "note: pygraphviz (the draw extra) did not build: install the system" \
	  "packages graphviz and libgraphviz-dev ('make system-deps' as root); drawings use matplotlib meanwhile"
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
