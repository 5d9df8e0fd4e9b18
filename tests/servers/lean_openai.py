"""The OpenAI-compatible test server's answers at a fraction of its CPU, for benchmarks.

    from servers.lean_openai import serve_lean

    with serve_lean(delay=0.05) as server:       # a fixed 50 ms per completion
        run(f"--openenv-llm-endpoint={server.base_url}", ...)
        print(server.requests, server.max_in_flight, server.connections)

``openai_compat.py`` runs a thread per connection and parses every request's headers with
``http.server`` (the ``email`` package): about 0.25 ms of CPU per completion, so at
``-n 2`` on two cores the benchmark's own server takes a quarter of the CPU the run being
measured needs. Here one asyncio thread serves every connection, reads only the request
line and ``Content-Length``, and waits out each completion's delay on a timer instead of
a sleeping thread. The answers are ``openai_compat``'s own (``decide`` and its
``completion``), so a run gets the same moves, ids and usage from either server.

No faults: a benchmark measures the happy path. ``GET .../models[/{id}]`` (the plugin's
check before a run) is answered as ``openai_compat`` answers it with no models set.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

try:
    from .fake_model import Faults, decide, serve_by_hand
    from .openai_compat import OpenAICompatServer
except ImportError:  # run as a script
    from fake_model import Faults, decide, serve_by_hand  # type: ignore[no-redef]
    from openai_compat import OpenAICompatServer  # type: ignore[no-redef]

#: more than the run's connections at once can fill (a dropped SYN is a 1 s stall)
BACKLOG = 1024
MAX_HEAD = 65536


def _response(status: int, payload: Any) -> bytes:
    data = json.dumps(payload).encode("utf-8")
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
    return b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        status,
        reason.encode(),
        len(data),
        data,
    )


class _Connection(asyncio.Protocol):
    def __init__(self, server: LeanOpenAIServer) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD:
                    self._close()
                return
            head = self.buffer[:end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip() or 0)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            method, _, rest = head.partition(b"\r\n")[0].partition(b" ")
            path = rest.split(b" ")[0].split(b"?")[0].decode("latin-1")
            self.server.handle(self, method.decode("latin-1"), path, body)

    def send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


class LeanOpenAIServer:
    """``openai_compat.OpenAICompatServer``'s completions and counters, on one asyncio thread."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections = 0
        self.model_checks = 0
        #: per completion, seconds its answer went out after its delay was up: how far this
        #: server fell behind (near 0: it was not what a run waited on)
        self.lags: list[float] = []
        self._answers = OpenAICompatServer(Faults())  # never started: its wire format only
        self._faults = Faults()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def thread_id(self) -> int | None:
        """The operating system's id of the thread that serves every connection."""
        return None if self._thread is None else self._thread.native_id

    # -- on the loop -----------------------------------------------------------
    def handle(self, conn: _Connection, method: str, path: str, raw: bytes) -> None:
        if method == "GET":
            self.model_checks += 1
            _, _, asked = path.partition("/models/")
            if asked:
                from urllib.parse import unquote

                conn.send(_response(200, self._answers.model_entry(unquote(asked))))
            elif path.endswith("/models"):
                conn.send(_response(200, self._answers.model_list([])))
            else:
                conn.send(_response(404, self._answers.error_body(404, f"no route {path}")))
            return
        if not path.endswith("/chat/completions"):
            conn.send(_response(404, self._answers.error_body(404, f"no route {path}")))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            conn.send(_response(400, self._answers.error_body(400, "body is not JSON")))
            return
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        due = self._loop.time() + self.delay
        if self.delay:
            self._loop.call_later(self.delay, self._complete, conn, body, due)
        else:
            self._complete(conn, body, due)

    def _complete(self, conn: _Connection, body: dict[str, Any], due: float) -> None:
        self.in_flight -= 1
        texts, turn = self._answers.texts_and_turn(body)
        decision = decide(texts, turn, self._faults, body.get("model"))
        usage = (sum(len(t) for t in texts) // 4 + 1, 7 + 5 * len(decision.calls))
        conn.send(_response(200, self._answers.completion(body, decision, usage)))
        self.lags.append(self._loop.time() - due)

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> LeanOpenAIServer:
        ready = threading.Event()

        async def listen() -> None:
            self._server = await self._loop.create_server(
                lambda: _Connection(self), "127.0.0.1", 0, backlog=BACKLOG
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(listen())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="lean-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the lean server did not start listening within 10 s")
        return self

    def __enter__(self) -> LeanOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._thread is None:
            return

        def close() -> None:
            if self._server is not None:
                self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(close)
        self._thread.join(timeout=5)
        self._thread = None


def serve_lean(delay: float = 0.0) -> LeanOpenAIServer:
    """The server, started when its ``with`` block is entered and stopped when it ends."""
    return LeanOpenAIServer(delay)


if __name__ == "__main__":
    serve_by_hand(serve_lean, __doc__.splitlines()[0])
