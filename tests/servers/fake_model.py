"""A deterministic tool-calling "model" behind a small HTTP server on 127.0.0.1, with faults.

Shared by ``openai_compat`` (chat completions) and ``anthropic_messages``
(Messages API): they only translate the wire format. The model reads the legal
actions from the conversation ("Legal actions: 0, 1, 2" as the openspiel family
prints them) and plays the first one, so its games match the ``scripted``
policy's. ``Faults`` makes it misbehave the way real endpoints and models do:

* transport: ``delay`` per completion, HTTP ``statuses`` for the next requests
  (429 bursts, 500s, 401s) with ``retry_after``, ``always_status``, ``hang``
  (never answer until the server stops), ``drop`` (close the connection without
  an answer: the endpoint looks unreachable), ``echo_auth`` (quote the received
  credentials in error bodies, as some proxies do: the plugin must scrub them),
  ``trickle`` (send the headers, then the body one byte every ``trickle`` seconds:
  slowloris, which no per-read timeout catches),
  ``echo_auth_in_reply`` (quote them in the reply text a model returns),
  ``raw_200`` (answer every request 200 with this (content type, body): an HTML page,
  JSON that is not a completion, as a wrong endpoint or a proxy does);
* model: per turn (``turn_faults``) or on every turn (``every_turn``) one of
  ``FAULT_KINDS``; per model name (``by_model``: the request's ``model``) one of them
  or ``last`` (play the last legal move), so two models of one run play differently;
  per model too, an HTTP status on every request (``status_by_model``: a model whose
  endpoint is down) and the ``usage`` it reports (``usage_by_model``: lying usage).

The server counts requests, in-flight requests (and their peak) and keeps the
request bodies, so tests can assert what was sent and how much.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

FAULT_KINDS = (
    "malformed",  # arguments that are not JSON
    "wrong_type",  # {"action_id": "four"}
    "unknown_tool",  # a tool nobody offered
    "illegal",  # a move that is not legal now
    "no_tool_call",  # text only
    "two_calls",  # two tool calls in one turn
)

#: ``Faults.by_model``: the model plays the last legal move
LAST = "last"

LEGAL = re.compile(r"Legal actions:\s*([0-9][0-9 ,()A-Za-z_\-]*)")


@dataclass
class Faults:
    delay: float = 0.0
    #: more seconds per completion for each other request in flight (a server slowing under load)
    delay_per_in_flight: float = 0.0
    statuses: list[int] = field(default_factory=list)
    retry_after: float | None = None
    always_status: int | None = None
    hang: bool = False
    drop: bool = False
    trickle: float | None = None
    echo_auth: bool = False
    echo_auth_in_reply: bool = False
    raw_200: tuple[str, str] | None = None
    turn_faults: dict[int, str] = field(default_factory=dict)
    every_turn: str | None = None
    #: how each model (the request's ``model``) plays instead: ``last`` (the last legal
    #: move, not the first) or one of ``FAULT_KINDS`` on every turn; others play as above
    by_model: dict[str, str] = field(default_factory=dict)
    #: sent as the completion's ``usage`` instead of the counts (``"abc"``, NaN, negative ...)
    usage: dict[str, Any] | None = None
    #: per model (the request's ``model``): the HTTP status it answers every request with
    status_by_model: dict[str, int] = field(default_factory=dict)
    #: per turn of a conversation (1 = its first model call): the HTTP status that turn's
    #: every request answers, so every episode fails there whatever the order of requests
    status_by_turn: dict[int, int] = field(default_factory=dict)
    #: per model: the completion's ``usage`` instead of the counts (``None``: ``usage: null``)
    usage_by_model: dict[str, Any] = field(default_factory=dict)
    #: (bytes, with Content-Length?): a completion whose text is that many bytes, streamed
    #: as it is written (the server holds a few KB), until sent or the client hangs up
    huge_answer: tuple[int, bool] | None = None
    #: the models ``GET /models`` lists and ``GET /models/{id}`` knows (the check before a
    #: run); empty: it lists none and knows every one, as a server that names no model
    models: tuple[str, ...] = ()
    #: the HTTP status every models request answers (401, 403: a refused key), if any
    models_status: int | None = None

    def __post_init__(self) -> None:
        for kind in [*self.turn_faults.values(), self.every_turn, *self.by_model.values()]:
            if kind == LAST:
                continue
            if kind is not None and kind not in FAULT_KINDS:
                raise ValueError(f"unknown fault {kind!r}; choose from {FAULT_KINDS}")


@dataclass(frozen=True)
class Decision:
    """What the model says this turn: text and (name, arguments JSON text) calls."""

    text: str
    calls: tuple[tuple[str, str], ...]


def legal_actions(texts: list[str]) -> list[int]:
    """The legal actions in the latest message that lists them."""
    for text in reversed(texts):
        found = LEGAL.findall(text)
        if found:
            return [int(n) for n in re.findall(r"(?<![(\w])(\d+)(?![\w)])", found[-1])]
    return []


def decide(texts: list[str], turn: int, faults: Faults, model: str | None = None) -> Decision:
    legal = legal_actions(texts)
    style = faults.by_model.get(model or "")
    move = (legal[-1] if style == LAST else legal[0]) if legal else 0
    play = ("play_move", json.dumps({"action_id": move}))
    kind = faults.turn_faults.get(turn, faults.every_turn)
    if style is not None and style != LAST:
        kind = style
    if kind == "malformed":
        return Decision("", (("play_move", '{"action_id": ' + str(move)),))
    if kind == "wrong_type":
        return Decision("", (("play_move", json.dumps({"action_id": "four"})),))
    if kind == "unknown_tool":
        return Decision("", (("resign", "{}"),))
    if kind == "illegal":
        taken = next((n for n in range(100) if n not in legal), 99)
        return Decision("", (("play_move", json.dumps({"action_id": taken})),))
    if kind == "no_tool_call":
        return Decision(f"I would play {move}.", ())
    if kind == "two_calls":
        second = legal[1] if len(legal) > 1 else move
        return Decision("", (play, ("play_move", json.dumps({"action_id": second}))))
    return Decision("", (play,))


class BacklogHTTPServer(ThreadingHTTPServer):
    """A threading server whose listen queue holds a benchmark's burst of connections.

    socketserver's default backlog of 5 overflows when 64 clients connect at once: the
    kernel drops the SYN and the client retries it 1 s later, a stall that is the
    benchmark's, not the code's under test (``listen_drops`` counts them).
    """

    request_queue_size = 1024
    allow_reuse_address = True
    connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1  # the one accepting thread counts
        super().process_request(request, client_address)


def listen_drops() -> int | None:
    """SYNs this machine's listen queues dropped so far (``TcpExt: ListenDrops``, which
    includes ``ListenOverflows``), from /proc/net/netstat; None where it is not readable.

    Machine-wide: read it before and after a run, on a machine with no other listener
    under load, to see what the run's server dropped.
    """
    try:
        lines = Path("/proc/net/netstat").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            drops = table.get("ListenDrops")
            return int(drops) if drops is not None else None
    return None


def call_id(prefix: str, history: Any, index: int) -> str:
    """Deterministic ids: the same conversation gets the same ids in every run."""
    digest = hashlib.sha1(json.dumps(history, sort_keys=True).encode()).hexdigest()[:12]
    return f"{prefix}{digest}_{index}"


class ModelServer:
    """Base: the HTTP plumbing, faults and counters. Subclasses speak one wire format."""

    #: POST paths (suffixes) this server answers
    paths: tuple[str, ...] = ()

    def __init__(self, faults: Faults | None = None, **kwargs: Any) -> None:
        self.faults = faults or Faults(**kwargs)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: list[float] = []
        #: requests in flight when each one arrived (itself included)
        self.in_flight_at_arrival: list[int] = []
        self.statuses_sent: list[int] = []
        #: (prompt, completion) tokens of each completion answered: what an endpoint bills
        self.served: list[tuple[int, int]] = []
        #: model list requests (``GET``), and the headers each carried
        self.model_checks = 0
        self.model_check_headers: list[dict[str, str]] = []
        #: per request: the path as sent (absolute through a proxy) and a few headers
        self.paths_seen: list[str] = []
        self.user_agents: list[str] = []
        self.authorizations: list[str] = []
        self._httpd: BacklogHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- wire format (subclasses) --------------------------------------------
    def texts_and_turn(self, body: dict[str, Any]) -> tuple[list[str], int]:
        raise NotImplementedError

    def completion(self, body: dict[str, Any], decision: Decision, usage: tuple[int, int]) -> Any:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> Any:
        raise NotImplementedError

    # -- lifecycle -----------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    #: ``https`` once started with ``tls``
    scheme = "http"

    @property
    def root_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url

    @property
    def connections(self) -> int:
        """TCP connections accepted so far (keep-alive clients reuse theirs)."""
        return self._httpd.connections if self._httpd is not None else 0

    def start(self, tls: tuple[str, str] | None = None) -> ModelServer:
        """Listen on 127.0.0.1; ``tls``: (certificate file, key file) to speak https."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes: without this, Nagle's algorithm and
            # the client's delayed ACK add ~40 ms to every response
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server._models(self)

            def do_POST(self) -> None:
                server._handle(self)

        self._httpd = BacklogHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
            self.scheme = "https"
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = 0
            self.max_in_flight = 0
            self.bodies.clear()
            self.arrivals.clear()
            self.in_flight_at_arrival.clear()
            self.statuses_sent.clear()
            self.served.clear()
            self.model_checks = 0
            self.model_check_headers.clear()
            self.paths_seen.clear()
            self.user_agents.clear()
            self.authorizations.clear()

    # -- the model list (GET): the plugin's check before a run ----------------
    def model_entry(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": 0, "owned_by": "fake"}

    def model_list(self, models: list[str]) -> dict[str, Any]:
        return {"object": "list", "data": [self.model_entry(m) for m in models]}

    def _models(self, handler: BaseHTTPRequestHandler) -> None:
        """``GET .../models`` and ``GET .../models/{id}``; counted in ``model_checks``, not in
        ``requests`` (which counts completions)."""
        from urllib.parse import unquote

        path = handler.path.split("?")[0]
        with self._lock:
            self.model_checks += 1
            self.model_check_headers.append(dict(handler.headers))
        faults = self.faults
        if faults.models_status:
            status = int(faults.models_status)
            self._send(handler, status, self.error_body(status, f"injected HTTP {status}"))
            return
        _, _, asked = path.partition("/models/")
        if asked:
            model = unquote(asked)
            if faults.models and model not in faults.models:
                self._send(
                    handler, 404, self.error_body(404, f"The model `{model}` does not exist.")
                )
                return
            self._send(handler, 200, self.model_entry(model))
            return
        if path.endswith("/models"):
            self._send(handler, 200, self.model_list(list(faults.models)))
            return
        self._send(handler, 404, self.error_body(404, f"no route {path}"))

    # -- one request ---------------------------------------------------------
    def _send(self, handler: BaseHTTPRequestHandler, status: int, payload: Any, **headers: str):
        data = json.dumps(payload).encode("utf-8")
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name.replace("_", "-"), value)
        handler.end_headers()
        handler.wfile.write(data)

    def _trickle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], every: float):
        """A whole, valid answer, one byte at a time, until sent or the server stops."""
        texts, turn = self.texts_and_turn(body)
        payload = self.completion(body, decide(texts, turn, self.faults), (1, 1))
        data = json.dumps(payload).encode("utf-8")
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.close_connection = True
        try:
            for i in range(len(data)):
                if self._stopping.wait(every):
                    return
                handler.wfile.write(data[i : i + 1])
                handler.wfile.flush()
        except OSError:  # the client gave up
            return

    def _huge(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], size: int, length: bool
    ) -> None:
        """A valid completion whose text is ``size`` bytes of ``x``, written in chunks."""
        marker = "HUGE-ANSWER-TEXT"
        payload = self.completion(body, Decision(marker, ()), (1, 1))
        head, _, tail = json.dumps(payload).partition(marker)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if length:
            handler.send_header("Content-Length", str(len(head) + size + len(tail)))
        handler.end_headers()
        handler.close_connection = True
        chunk = b"x" * 65536
        try:
            handler.wfile.write(head.encode())
            for start in range(0, size, len(chunk)):
                if self._stopping.is_set():
                    return
                handler.wfile.write(chunk[: min(len(chunk), size - start)])
            handler.wfile.write(tail.encode())
        except OSError:  # the client stopped reading
            return

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        path = handler.path.split("?")[0]
        if not any(path.endswith(p) for p in self.paths):
            self._send(handler, 404, self.error_body(404, f"no route {path}"))
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._send(handler, 400, self.error_body(400, "body is not JSON"))
            return
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.bodies.append(body)
            self.arrivals.append(time.monotonic())
            self.in_flight_at_arrival.append(self.in_flight)
            self.paths_seen.append(handler.path)
            self.user_agents.append(handler.headers.get("User-Agent") or "")
            self.authorizations.append(handler.headers.get("Authorization") or "")
            status = self.faults.statuses.pop(0) if self.faults.statuses else None
            others = self.in_flight - 1
        try:
            self._answer(handler, body, status, others)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], status: Any, others: int = 0
    ) -> None:
        faults = self.faults
        if faults.hang:
            self._stopping.wait(600)
            handler.close_connection = True
            return
        if faults.drop:  # close the connection without a response
            handler.close_connection = True
            return
        if faults.trickle is not None:
            self._trickle(handler, body, faults.trickle)
            return
        if faults.huge_answer is not None:
            self._huge(handler, body, *faults.huge_answer)
            return
        if faults.raw_200 is not None:
            content_type, text = faults.raw_200
            data = text.encode("utf-8")
            handler.send_response(200)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        status = status or faults.always_status or faults.status_by_model.get(body.get("model"))
        if not status and faults.status_by_turn:
            status = faults.status_by_turn.get(self.texts_and_turn(body)[1])
        if status:
            message = f"injected HTTP {status}"
            if faults.echo_auth:
                seen = handler.headers.get("Authorization") or handler.headers.get("x-api-key")
                message += f"; received credentials: {seen}"
            headers = {}
            if faults.retry_after is not None:
                headers["Retry-After"] = f"{faults.retry_after:g}"
            with self._lock:
                self.statuses_sent.append(int(status))
            self._send(handler, int(status), self.error_body(int(status), message), **headers)
            return
        if faults.delay or faults.delay_per_in_flight:
            time.sleep(faults.delay + faults.delay_per_in_flight * others)
        texts, turn = self.texts_and_turn(body)
        decision = decide(texts, turn, faults, body.get("model"))
        if faults.echo_auth_in_reply:
            seen = handler.headers.get("Authorization") or handler.headers.get("x-api-key")
            decision = Decision(f"{decision.text} (my request said {seen})".strip(), decision.calls)
        prompt_tokens = sum(len(t) for t in texts) // 4 + 1
        completion_tokens = 7 + 5 * len(decision.calls)
        with self._lock:
            self.statuses_sent.append(200)
            self.served.append((prompt_tokens, completion_tokens))
        payload = self.completion(body, decision, (prompt_tokens, completion_tokens))
        if faults.usage is not None:  # json.dumps writes NaN and Infinity as such
            payload["usage"] = faults.usage
        if body.get("model") in faults.usage_by_model:
            payload["usage"] = faults.usage_by_model[body.get("model")]
        self._send(handler, 200, payload)


def serve_by_hand(serve: Callable[..., Any], description: str) -> None:
    """``python tests/servers/NAME.py --delay S``: start ``serve(delay=S)``, print its base
    URL, and serve until Ctrl-C."""
    import argparse
    import contextlib

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per completion")
    args = parser.parse_args()
    with serve(delay=args.delay) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
