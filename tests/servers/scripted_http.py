"""A loopback HTTP server whose answers a test scripts, byte by byte if need be.

For the bounded fetch (``pytest_openenv/util/fetch.py``) and the checks that use it: an
answer trickled one byte at a time, a redirect to another server, garbled chunks, an
endpoint that wants Basic auth. Every request is recorded (path, headers)::

    with ScriptedHTTP({"/health": trickled(b'{"status": "healthy"}', every=2.0)}) as server:
        check(server.url)
        server.requests  # [Seen(path="/health", headers={...})]
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: writes one whole answer to the handler's socket
Script = Callable[[BaseHTTPRequestHandler, threading.Event], None]


@dataclass(frozen=True)
class Seen:
    path: str
    #: names in lower case
    headers: dict[str, str]


def raw(data: bytes) -> Script:
    """Exactly these bytes, then the connection closes."""

    def answer(handler: BaseHTTPRequestHandler, stopped: threading.Event) -> None:
        handler.wfile.write(data)
        handler.close_connection = True

    return answer


def answer_json(payload: Any, status: int = 200, content_type: str = "application/json") -> Script:
    body = json.dumps(payload).encode()
    return raw(
        f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


def with_headers(status: int, headers: dict[str, str], body: bytes = b"{}") -> Script:
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return raw(
        f"HTTP/1.1 {status} X\r\n{lines}Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )


def trickled(body: bytes, every: float) -> Script:
    """A whole answer, status line and headers included, one byte per ``every`` seconds
    (every read the client makes succeeds: a per-read timeout never fires)."""
    data = (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )

    def answer(handler: BaseHTTPRequestHandler, stopped: threading.Event) -> None:
        handler.close_connection = True
        for byte in data:
            try:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
            except OSError:  # the client gave up
                return
            if stopped.wait(every):
                return

    return answer


def redirect(location: str, status: int = 302) -> Script:
    return raw(
        f"HTTP/1.1 {status} Moved\r\nLocation: {location}\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n".encode()
    )


def garbled_chunks(status: int) -> Script:
    """A chunked answer whose second chunk size line is no hex number."""
    return raw(
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode()
        + b'5\r\n{"dat\r\nzz-not-hex\r\na": []}\r\n0\r\n\r\n'
    )


def basic_only(user: str, password: str, then: Script) -> Script:
    """``then`` for a request with these Basic credentials, else a 401."""
    wanted = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    refused = answer_json({"error": {"message": "wrong credentials"}}, status=401)

    def answer(handler: BaseHTTPRequestHandler, stopped: threading.Event) -> None:
        chosen = then if handler.headers.get("Authorization") == wanted else refused
        chosen(handler, stopped)

    return answer


class ScriptedHTTP:
    """Answers each path (``GET`` or ``POST``) with its script (404 for any other), on
    127.0.0.1."""

    def __init__(self, routes: dict[str, Script]) -> None:
        self.routes = dict(routes)
        self.requests: list[Seen] = []
        self.stopped = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.do_GET()

            def do_GET(self) -> None:
                headers = {name.lower(): value for name, value in self.headers.items()}
                owner.requests.append(Seen(self.path, headers))
                script = owner.routes.get(self.path.split("?")[0])
                if script is None:
                    script = answer_json({"detail": "Not Found"}, status=404)
                script(self, owner.stopped)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]

    def __enter__(self) -> ScriptedHTTP:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()
