#!/usr/bin/env bash
# The sandbox's tests as an unprivileged user (nobody), so that the normal-user case is proven too.
# Run by `make test` when it runs as root (as CI does); a normal user's `make test` already is that case.
# The interpreter under /root (pyenv) is out of nobody's reach, so this uses Debian's python3 in its own
# small venv, and a copy of the checkout that nobody can read. Usage: .ci/test_unprivileged.sh [PYTEST ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "$(id -u)" != 0 ]]; then
    echo "test_unprivileged.sh: not root, so the main suite already ran as an unprivileged user"
    exit 0
fi
need=()
command -v runuser >/dev/null || need+=(util-linux)
[[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c "import ensurepip, venv" 2>/dev/null || need+=(python3 python3-venv)
command -v bwrap >/dev/null || need+=(bubblewrap)
if ((${#need[@]})); then
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi

WORK=/tmp/rlgpt-unprivileged
VENV=$WORK/venv
mkdir -p "$WORK"
chmod 755 "$WORK"
if [[ ! -x $VENV/bin/python ]]; then
    /usr/bin/python3 -m venv "$VENV"
fi
# What the sandbox and its tests import (no torch, no LangGraph).
"$VENV/bin/python" -m pip install -q --disable-pip-version-check \
    "numpy>=1.26" "crafter==1.8.3" "numba>=0.59" "gymnasium>=1.0,<2" "pydantic>=2.7,<3" \
    "langchain-core>=1.0,<2" "pytest>=8" "pytest-timeout>=2.3"
rm -rf "$WORK/src"
mkdir -p "$WORK/src"
tar --exclude=./.venv --exclude=./runs --exclude=./results --exclude=./.git -cf - . | tar -xf - -C "$WORK/src"
chmod -R a+rX "$WORK"
cd "$WORK/src"
echo "test_unprivileged.sh: the sandbox's tests as $(runuser -u nobody -- id)"
exec runuser -u nobody -- env -i PATH=/usr/bin:/bin HOME=/tmp \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/test_hostile.py tests/test_sandbox.py "$@"
