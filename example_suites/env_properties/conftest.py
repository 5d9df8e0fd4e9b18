"""The server the remote properties run against.

Set ``OPENENV_TICTACTOE_URL`` to check a deployed server (a Hugging Face Space,
a container); otherwise the suite starts ``tictactoe_server.py`` on a free
127.0.0.1 port for the session and stops it at the end. That server is built with
the ``openenv`` package and served by ``uvicorn``: the ``examples`` extra brings both.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest


def _wait_healthy(url: str, thread: threading.Thread, timeout: float = 60.0) -> None:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while True:
        try:
            with opener.open(url + "/health", timeout=2.0):
                return
        except OSError:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the tic-tac-toe server at {url} did not come up") from None
            time.sleep(0.05)


@pytest.fixture(scope="session")
def tictactoe_server_url() -> Iterator[str]:
    deployed = os.environ.get("OPENENV_TICTACTOE_URL")
    if deployed:
        yield deployed
        return
    try:
        import uvicorn
        from tictactoe_server import build_app
    except ModuleNotFoundError as exc:
        pytest.fail(
            f"the remote properties run a local OpenEnv server, which needs {exc.name}: "
            "python -m pip install -e '../..[examples]' (in a clone of pytest-openenv), "
            "or set OPENENV_TICTACTOE_URL to a deployed server",
            pytrace=False,
        )

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(build_app(), log_level="warning", ws_ping_interval=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        _wait_healthy(url, thread)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
