"""Chat completions over the standard library's ``http.client``: keep-alive, retries, bounds.

What ``--openenv-llm-client=http`` sends (the default for ``--openenv-llm-endpoint``).
Per request it costs a fraction of the CPU of the SDK's httpx stack (``bench/http_clients.py``):
under the GIL that CPU caps how many episodes one process keeps waiting on the model.

It keeps what the SDK path does, with the SDK's own rules:

* retries (``--openenv-max-retries``, default 2) on 408, 409, 429, 5xx, timeouts and
  connection errors; the wait is ``Retry-After`` / ``retry-after-ms`` when 0-60 s, else
  0.5 s doubling to 8 s with up to 25% jitter; ``x-should-retry`` overrides; a server asking
  for more than ``LONGEST_RETRY_AFTER`` is not retried;
* one wall-clock bound per attempt covering connect, send, headers and body (a trickled
  answer cannot hold it), and never past the episode's deadline;
* ``MAX_ANSWER_BYTES`` on the body (``Content-Length`` first, then the bytes read);
* the base URL's path (``http://host/v1`` posts to ``/v1/chat/completions``), its
  credentials as Basic auth (as httpx does) or else the key as a Bearer token;
* https with ``ssl.create_default_context()`` (the system's CAs; ``SSL_CERT_FILE`` and
  ``SSL_CERT_DIR`` as OpenSSL reads them), proxies from ``HTTP(S)_PROXY`` / ``NO_PROXY``
  (as httpx reads the environment), never for a loopback endpoint.

Connections are pooled (last in, first out) rather than tied to threads, so a process
holds at most as many as it had requests in flight at once, whatever its thread churn.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import __version__
from ...errors import EndpointStatus, EndpointTimeout, EndpointUnreachable
from ...util.jsonlimits import MAX_ANSWER_BYTES
from .deadline import LONGEST_RETRY_AFTER, retry_after, too_large

#: the openai SDK's defaults, kept so both paths retry alike
DEFAULT_MAX_RETRIES = 2
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
#: the longest Retry-After taken as the wait; longer ones (up to LONGEST_RETRY_AFTER) back off
HONOURED_RETRY_AFTER = 60.0
READ_CHUNK = 65536
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: failures of a pooled connection the server closed while it sat idle: the request never
#: reached the server, so it is sent again on a new connection without spending a retry
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True)
class Answer:
    status_code: int
    #: lower-case names
    headers: dict[str, str]
    body: bytes

    @property
    def is_json(self) -> bool:
        return "json" in self.headers.get("content-type", "")


def retried_status(status: int, headers: dict[str, str]) -> bool:
    """The SDK's rule: the server's ``x-should-retry`` first, then 408/409/429/5xx."""
    said = headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return status in (408, 409, 429) or status >= 500


def backoff(retry: int, headers: dict[str, str] | None) -> float | None:
    """Seconds before retry number ``retry`` (0-based), or None: the server asked too long."""
    wait = retry_after(headers) if headers else None
    if wait is not None and wait > LONGEST_RETRY_AFTER:
        return None
    if wait is not None and 0 < wait <= HONOURED_RETRY_AFTER:
        return wait
    delay = min(INITIAL_RETRY_DELAY * 2.0**retry, MAX_RETRY_DELAY)
    return delay * (1 - 0.25 * random.random())


def _basic(user: str, password: str) -> str:
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return "Basic " + base64.b64encode(token).decode("ascii")


class ChatEndpoint:
    """``POST {base_url}/chat/completions`` with a JSON body; thread-safe."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        max_retries: int | None,
        on_attempt: Callable[[], None] | None = None,
        on_answer: Callable[[Answer], None] | None = None,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.scheme = parts.scheme.lower()
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        if parts.port:
            netloc += f":{parts.port}"
        #: for error messages: no credentials, no path
        self.where = f"{self.scheme}://{netloc}"
        path = parts.path.rstrip("/") + "/chat/completions"
        self.path = path + (f"?{parts.query}" if parts.query else "")
        self.max_retries = DEFAULT_MAX_RETRIES if max_retries is None else max_retries
        self._on_attempt = on_attempt
        self._on_answer = on_answer
        self._max_bytes = max_bytes
        auth = (
            _basic(parts.username, parts.password or "")
            if parts.username is not None
            else f"Bearer {api_key}"
        )
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": auth,
            "User-Agent": f"pytest-openenv/{__version__} (http.client)",
        }
        self._context = ssl.create_default_context() if self.scheme == "https" else None
        self._proxy = self._proxy_for(netloc)
        if self._proxy is not None and self.scheme == "http":
            # a plain-HTTP proxy takes the absolute URL (http.client sets Host from it)
            self.path = f"{self.where}{self.path}"
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _proxy_for(self, netloc: str) -> urllib.parse.SplitResult | None:
        if self.host in LOOPBACK_HOSTS:
            return None
        if urllib.request.proxy_bypass_environment(netloc):
            return None
        proxy = urllib.request.getproxies_environment().get(self.scheme)
        if not proxy:
            return None
        if "://" not in proxy:
            proxy = "http://" + proxy
        return urllib.parse.urlsplit(proxy)

    # -- connections ---------------------------------------------------------
    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        proxy = self._proxy
        host, port = self.host, self.port
        tunnel_headers: dict[str, str] = {}
        if proxy is not None:
            host, port = proxy.hostname or "", proxy.port or 80
            if proxy.username is not None:
                tunnel_headers["Proxy-Authorization"] = _basic(proxy.username, proxy.password or "")
        conn: http.client.HTTPConnection
        if self._context is not None:
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._context)
            if proxy is not None:
                conn.set_tunnel(self.host, self.port, headers=tunnel_headers)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
            if proxy is not None:
                conn.proxy_headers = tunnel_headers  # type: ignore[attr-defined]
        return conn

    def _checkout(self, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(timeout), False

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- one request ---------------------------------------------------------
    def post(self, body: bytes, timeout: float, deadline: float | None = None) -> Answer:
        """The first 2xx answer, after up to ``max_retries`` retries.

        ``timeout`` bounds each attempt, ``deadline`` (monotonic) all of them: no attempt
        runs and no wait sleeps past it. Raises ``EndpointTimeout``, ``EndpointUnreachable``,
        ``EndpointStatus`` (with the last answer) or ``AnswerTooLarge``.
        """
        retry = 0
        while True:
            started = time.monotonic()
            ends = started + timeout if deadline is None else min(started + timeout, deadline)
            headers: dict[str, str] | None = None
            try:
                answer = self._attempt(body, ends)
            except TimeoutError:
                failure: Exception = EndpointTimeout(f"no whole answer within {timeout:g}s")
            except (OSError, http.client.HTTPException) as exc:
                failure = EndpointUnreachable(f"{type(exc).__name__}: {exc}")
                failure.__cause__ = exc
            else:
                if self._on_answer is not None:
                    self._on_answer(answer)
                if 200 <= answer.status_code < 300:
                    return answer
                headers = answer.headers
                failure = EndpointStatus(answer.status_code, self._error_body(answer), headers)
                if not retried_status(answer.status_code, headers):
                    raise failure
            if retry >= self.max_retries:
                raise failure
            wait = backoff(retry, headers)
            if wait is None or (deadline is not None and time.monotonic() + wait >= deadline):
                raise failure
            time.sleep(wait)
            retry += 1

    def _attempt(self, body: bytes, ends: float) -> Answer:
        """One request sent (again on a new connection if a pooled one had gone stale)."""
        conn, reused = self._checkout(self._left(ends))
        if self._on_attempt is not None:
            self._on_attempt()
        try:
            return self._exchange(conn, body, ends)
        except STALE:
            conn.close()
            if not reused:
                raise
        except BaseException:
            conn.close()
            raise
        conn = self._connect(self._left(ends))
        try:
            return self._exchange(conn, body, ends)
        except BaseException:
            conn.close()
            raise

    def _exchange(self, conn: http.client.HTTPConnection, body: bytes, ends: float) -> Answer:
        self._settimeout(conn, ends)
        headers = self.headers
        proxy_headers = getattr(conn, "proxy_headers", None)
        if proxy_headers:
            headers = {**headers, **proxy_headers}
        conn.request("POST", self.path, body, headers)
        sock = conn.sock  # the response may take it over (Connection: close)
        self._settimeout(conn, ends)
        response = conn.getresponse()
        names = {name.lower(): value for name, value in response.getheaders()}
        size = names.get("content-length", "")
        if size.isdigit() and int(size) > self._max_bytes:
            conn.close()
            raise too_large(self.where, f"Content-Length: {size}", self._max_bytes)
        chunks = []
        read = 0
        # read1: one socket read per call, so the deadline is checked between reads
        # (read(n) loops until n bytes: a trickled body would hold it)
        while response.length != 0:
            if sock is not None:
                sock.settimeout(self._left(ends))
            chunk = response.read1(READ_CHUNK)
            if not chunk:
                break
            read += len(chunk)
            if read > self._max_bytes:
                conn.close()
                raise too_large(self.where, f"{read} bytes read", self._max_bytes)
            chunks.append(chunk)
        # a finished response must be closed (its file, not the socket) before the
        # connection takes the next request
        response.close()
        if response.will_close:
            conn.close()
        else:
            self._checkin(conn)
        return Answer(response.status, names, b"".join(chunks))

    @staticmethod
    def _left(ends: float) -> float:
        left = ends - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def _settimeout(self, conn: http.client.HTTPConnection, ends: float) -> None:
        left = self._left(ends)
        conn.timeout = left
        if conn.sock is not None:
            conn.sock.settimeout(left)

    @staticmethod
    def _error_body(answer: Answer) -> Any:
        text = answer.body.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text
