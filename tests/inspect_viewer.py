"""``inspect view`` (inspect-ai's log viewer) on loopback for the suite, bounded in time."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def inspect_view(log_dir: Path, seconds: float = 60) -> Iterator[str]:
    """``inspect view`` on loopback, stopped at the end (and within ``seconds`` at most)."""
    inspect = shutil.which("inspect", path=os.path.dirname(sys.executable)) or "inspect"
    port = free_port()
    process = subprocess.Popen(
        [
            "timeout",
            str(int(seconds)),
            inspect,
            "view",
            "--log-dir",
            str(log_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/api/log-files", timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(process.stderr.read() if process.stderr else "") from None
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)
