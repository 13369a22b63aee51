"""The llama.cpp server for the integration tests; it lives in `nodes.models.local` (what
`--model smollm2` starts) and is re-exported here for the tests. By hand:

    .venv/bin/python tests/llm_server.py      # prints OPENAI_BASE_URL=... and serves until Ctrl-C
"""

from __future__ import annotations

from nodes.models.local import LlamaServer, LlamaServerError, free_port, serve_until_interrupted, smollm2_model_path

__all__ = ["LlamaServer", "LlamaServerError", "free_port", "smollm2_model_path"]

if __name__ == "__main__":
    serve_until_interrupted()
