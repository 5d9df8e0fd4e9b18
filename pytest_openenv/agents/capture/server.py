"""The capture proxy: a loopback HTTP server an agent's model base URL points at.

One per process, shared by the episodes in flight: each episode opens a ``ProxySession``
whose token is the agent's "API key"; a request without a live session's token is refused
401, so an agent reaches the model only during its own episode and only as itself. The
real key is read by ``UpstreamClient`` and never leaves it.
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .anthropic_form import count_tokens
from .dialects import Dialect, dialect_for_errors, dialect_of
from .records import CapturedCall, ChatAnswer, summed_usage
from .responses_form import StatefulRequest
from .upstream import Upstream, UpstreamClient, UpstreamError

log = logging.getLogger("pytest_openenv.agents.capture")

#: the upstream's own call: a chat-form request in, the answer and its seconds out
Complete = Callable[[dict[str, Any]], tuple[ChatAnswer, float]]
Forward = Callable[[dict[str, Any], Complete], tuple[ChatAnswer, float]]

#: the largest request body an agent may send (a long conversation, not a flood)
MAX_REQUEST_BYTES = 64 * 1024 * 1024
#: the status of a call refused for a limit: one the SDKs do not retry
LIMIT_STATUS = 400


@dataclass
class ProxySession:
    """One episode's access to the model, and every call it made."""

    token: str
    #: the turn limit: answered model calls allowed (None: no limit)
    max_calls: int | None = None
    #: prompt plus completion tokens allowed over the episode (None: no budget)
    max_tokens: int | None = None
    calls: list[CapturedCall] = field(default_factory=list)
    #: a call was refused for the turn limit
    over_limit: bool = False
    #: a call was refused for the token budget
    over_budget: bool = False
    #: set when a limit refuses a call: the runner may stop the agent then
    limit_hit: threading.Event = field(default_factory=threading.Event, repr=False)
    #: set after every call recorded or refused: whoever waits on the episode looks again
    wake: threading.Event = field(default_factory=threading.Event, repr=False)
    closed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _in_flight: int = field(default=0, repr=False)
    #: running sums of ``calls`` (answered calls, prompt and completion tokens)
    _answered: int = field(default=0, repr=False)
    _prompt: int = field(default=0, repr=False)
    _completion: int = field(default=0, repr=False)
    _on_close: Any = field(default=None, repr=False)

    @property
    def usage(self) -> tuple[int, int]:
        """(prompt tokens, completion tokens) summed over every call."""
        with self._lock:
            return self._prompt, self._completion

    @property
    def answered_calls(self) -> int:
        with self._lock:
            return self._answered

    def admit(self) -> str | None:
        """Take a call's place under the limits, or say why the call is refused (and set the
        flag). Calls in flight hold their place, so parallel calls (sub-agents) cannot pass
        the turn limit together; ``record`` gives the place back."""
        with self._lock:
            if self.max_calls is not None and self._answered + self._in_flight >= self.max_calls:
                self.over_limit = True
                self.limit_hit.set()
                self.wake.set()
                return f"the episode's turn limit of {self.max_calls} model calls is reached"
            spent = self._prompt + self._completion
            if self.max_tokens is not None and spent >= self.max_tokens:
                self.over_budget = True
                self.limit_hit.set()
                self.wake.set()
                return (
                    f"the episode's token budget of {self.max_tokens} is spent "
                    f"({spent} tokens used)"
                )
            self._in_flight += 1
        return None

    def record(self, call: CapturedCall, admitted: bool = True) -> None:
        prompt, completion = summed_usage([call])
        with self._lock:
            self.calls.append(call)
            self._answered += call.answered
            self._prompt += prompt
            self._completion += completion
            if admitted:
                self._in_flight -= 1
        self.wake.set()

    def close(self) -> None:
        """Later requests with this token are refused 401."""
        self.closed = True
        if self._on_close is not None:
            self._on_close(self.token)


class CaptureProxy:
    """The server and its sessions. Thread-safe; a context manager (start, close)."""

    def __init__(self, upstream: Upstream, forward: Forward | None = None) -> None:
        self.upstream = upstream
        #: how a chat-form request reaches the upstream: None, straight; else
        #: ``forward(request, complete)``, which may answer itself (a response cache, a
        #: replay with the endpoint down) or call ``complete``; it raises ``UpstreamError``
        #: for an answer the agent must not get
        self.forward = forward
        self._client: UpstreamClient | None = None
        self._sessions: dict[str, ProxySession] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> str:
        """Listen on 127.0.0.1 (a free port); the base URL, ``http://127.0.0.1:PORT``.

        OpenAI clients take ``base_url + "/v1"``, Anthropic clients the base URL itself.
        """
        if self._httpd is None:
            self._client = UpstreamClient(self.upstream)
            self._httpd = _Server(("127.0.0.1", 0), _handler_for(self))
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, name="capture-proxy", daemon=True
            )
            self._thread.start()
        return self.base_url

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the capture proxy is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._client is not None:
            self._client.close()
            self._client = None
        with self._lock:
            for session in self._sessions.values():
                session.closed = True
            self._sessions.clear()

    def __enter__(self) -> CaptureProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions ----------------------------------------------------------------------
    def open_session(
        self,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        wake: threading.Event | None = None,
    ) -> ProxySession:
        """A new episode's token, with its turn limit and token budget; ``wake`` is set
        after each of its calls (the runner's, shared with the MCP bridge)."""
        session = ProxySession(
            token=f"capture-{secrets.token_urlsafe(24)}",
            max_calls=max_calls,
            max_tokens=max_tokens,
            _on_close=self._forget,
        )
        if wake is not None:
            session.wake = wake
        with self._lock:
            self._sessions[session.token] = session
        return session

    def _forget(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token, None)

    def session_for(self, token: str | None) -> ProxySession | None:
        if not token:
            return None
        with self._lock:
            session = self._sessions.get(token)
        return session if session is not None and not session.closed else None

    # -- one model call ----------------------------------------------------------------
    def handle_call(
        self, session: ProxySession, dialect: Dialect, body: dict[str, Any]
    ) -> tuple[int, Any]:
        """(status, the answer or the error message); records the call."""
        received = time.monotonic()
        stream = bool(body.get("stream"))
        agent_model = str(body.get("model", ""))
        try:
            request = dialect.to_chat(body)
        except StatefulRequest as exc:
            return 400, str(exc)
        client = self._client
        if client is None:
            return 503, "the capture proxy is closed"
        refusal = session.admit()
        call = CapturedCall(
            dialect=dialect.name,
            request_messages=list(request.get("messages") or []),
            tools=list(request.get("tools") or []),
            response_message={},
            agent_model=agent_model,
            stream=stream,
            received=received,
        )
        if refusal is not None:
            call.status, call.error = LIMIT_STATUS, refusal
            session.record(call, admitted=False)
            return LIMIT_STATUS, refusal
        try:
            if self.forward is None:
                answer, seconds = client.complete(request)
            else:
                answer, seconds = self.forward(request, client.complete)
        except UpstreamError as exc:
            call.status, call.error = exc.status, exc.message
            session.record(call)
            return exc.status, exc.message
        call.response_message = answer.message
        call.usage = dict(answer.usage)
        call.seconds = seconds
        session.record(call)
        return 200, answer


class _Server(ThreadingHTTPServer):
    # many agents connect at once when episodes start together: socketserver's backlog of 5
    # drops the extra SYNs, and each client retries a second later
    request_queue_size = 1024
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # an agent killed at its episode's end resets its keep-alive connection: that is
        # the episode ending, not an error to print into the run's output
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def _bearer(headers: Any) -> str | None:
    auth = headers.get("Authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return headers.get("x-api-key") or headers.get("api-key") or None


def _handler_for(proxy: CaptureProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes
        server_version = "pytest-openenv-capture"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the access log is ours (``log``), without headers

        # -- replies ---------------------------------------------------------------
        def _json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, dialect: Dialect, status: int, message: str) -> None:
            self._json(status, dialect.error(status, message))

        def _stream(self, chunks: Any) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for chunk in chunks:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # the agent hung up mid-stream
                self.close_connection = True

        def _path(self) -> str:
            return self.path.split("?")[0].rstrip("/") or "/"

        def _session(self, dialect: Dialect) -> ProxySession | None:
            session = proxy.session_for(_bearer(self.headers))
            if session is None:
                self._drain()
                self._error(dialect, 401, "invalid or expired capture token")
                log.info("refused %s %s: no live session's token", self.command, self._path())
            return session

        def _drain(self) -> None:
            if self._body() is None:
                self.close_connection = True

        def _body(self) -> bytes | None:
            """The request body (``Content-Length`` or chunked); None when it is over
            ``MAX_REQUEST_BYTES`` or unreadable (the connection is then closed)."""
            if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    return None
                return self.rfile.read(length) if 0 <= length <= MAX_REQUEST_BYTES else None
            parts: list[bytes] = []
            size = 0
            while True:
                try:
                    chunk = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    return None
                size += chunk
                if size > MAX_REQUEST_BYTES:
                    return None
                if chunk == 0:
                    while self.rfile.readline(8192).strip():  # trailers
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(chunk))
                self.rfile.readline(8)  # the CRLF after each chunk

        # -- methods ---------------------------------------------------------------
        def do_HEAD(self) -> None:
            # the CLIs probe that the base URL answers before their first call
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            path = self._path()
            dialect = dialect_for_errors(path, self.headers)
            if path == "/":
                self._json(200, {"service": "capture-proxy"})
                return
            if path not in ("/v1/models", "/models") and not path.startswith(
                ("/v1/models/", "/models/")
            ):
                self._error(dialect, 404, f"no route GET {path}")
                return
            if self._session(dialect) is None:
                return
            model = proxy.upstream.model
            entry = {
                "id": model,
                "object": "model",
                "type": "model",
                "display_name": model,
                "created": 0,
                "created_at": "1970-01-01T00:00:00Z",
                "owned_by": "capture-proxy",
            }
            if "/models/" in path:
                self._json(200, entry)
                return
            self._json(
                200,
                {
                    "object": "list",
                    "data": [entry],
                    "has_more": False,
                    "first_id": model,
                    "last_id": model,
                },
            )

        def do_POST(self) -> None:
            path = self._path()
            counting = path in ("/v1/messages/count_tokens", "/messages/count_tokens")
            dialect = dialect_of(path)
            error_dialect = dialect or dialect_for_errors(path, self.headers)
            if dialect is None and not counting:
                self._drain()
                self._error(error_dialect, 404, f"no route POST {path}")
                return
            session = self._session(error_dialect)
            if session is None:
                return
            raw = self._body()
            if raw is None:
                self.close_connection = True
                self._error(
                    error_dialect, 413, f"request body unreadable or over {MAX_REQUEST_BYTES} bytes"
                )
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._error(error_dialect, 400, "the request body is not JSON")
                return
            if not isinstance(body, dict):
                self._error(error_dialect, 400, "the request body is not a JSON object")
                return
            if counting:
                self._json(200, count_tokens(body))
                return
            assert dialect is not None
            started = time.monotonic()
            status, result = proxy.handle_call(session, dialect, body)
            log.debug("%s call: HTTP %s in %.3fs", dialect.name, status, time.monotonic() - started)
            if status != 200:
                self._error(dialect, status, str(result))
            elif body.get("stream"):
                self._stream(dialect.stream(result, body))
            else:
                self._json(200, dialect.answer(result, body))

    return Handler
