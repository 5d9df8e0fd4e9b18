"""Chat completions on connections ``http.client`` opens: keep-alive, retries, bounds.

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
  (as httpx reads the environment), never for a loopback endpoint;
* 307/308 redirects followed with the body, the key only to the same origin (as httpx).

``http.client`` opens each connection (TCP, the proxy's CONNECT tunnel, TLS); requests
and answers on it are framed here (``Link``): ``http.client``'s own framing was most of
a request's CPU.

Connections are pooled (last in, first out) rather than tied to threads, so a process
holds at most as many as it had requests in flight at once, whatever its thread churn.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import random
import re
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..._version import __version__
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
#: the most bytes of status line and headers taken before the blank line (http.client's
#: line limit); past it the answer is no HTTP an endpoint would send
MAX_HEAD = 65536
#: redirects one attempt follows (httpx's default)
MAX_REDIRECTS = 20
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: failures of a pooled connection the server closed while it sat idle: the request never
#: reached the server, so it is sent again on a new connection without spending a retry
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
LINE_BREAK = re.compile(r"[\r\n]")
#: bound each read and write of a plain TCP connection in the kernel (SO_RCVTIMEO and
#: SO_SNDTIMEO on a blocking socket) rather than with ``settimeout``: a socket with a
#: timeout is non-blocking, and each read is a ``poll`` then the read, two releases of the
#: GIL, with a third for the ``ioctl`` that sets the timeout anew. A thread that releases
#: the GIL waits to take it back behind every other thread of the process (at C=64 that
#: wait was 0.3 ms per release, measured), so an answer that arrived waited twice before
#: its thread could read it. Linux's ``struct timeval`` is two native longs; elsewhere,
#: and for TLS (whose reads the ssl module drives), sockets keep ``settimeout``.
KERNEL_TIMEOUTS = sys.platform.startswith("linux")
TIMEVAL = struct.Struct("ll")


@dataclass(frozen=True)
class Answer:
    status_code: int
    #: lower-case names
    headers: dict[str, str]
    body: bytes

    def decoded(self) -> Any:
        """The body as JSON when it parses, whatever the content type says, else its text
        (as the openai SDK reads an answer it expects a model of)."""
        text = self.body.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text


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
        resource: str | None = "/chat/completions",
        authorization: str | None = None,
    ) -> None:
        """``resource``: appended to the base URL's path (None: the URL is the resource's,
        a redirect's ``Location``); ``authorization``: the header's value (None: from the
        URL's credentials or the key; "": none)."""
        parts = urllib.parse.urlsplit(base_url)
        self.scheme = parts.scheme.lower()
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.scheme == "https" else 80)
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        if parts.port:
            netloc += f":{parts.port}"
        #: for error messages: no credentials, no path
        self.where = f"{self.scheme}://{netloc}"
        path = parts.path if resource is None else parts.path.rstrip("/") + resource
        self.path = (path or "/") + (f"?{parts.query}" if parts.query else "")
        #: the resource's URL without credentials (redirects are resolved against it)
        self.url = self.where + self.path
        self._settings = (max_retries, on_attempt, max_bytes)
        #: endpoints that 307/308 redirects led to, by URL (their connections kept too)
        self._redirects: dict[str, ChatEndpoint] = {}
        self.max_retries = DEFAULT_MAX_RETRIES if max_retries is None else max_retries
        self._on_attempt = on_attempt
        self._on_answer = on_answer
        self._max_bytes = max_bytes
        auth = authorization
        if auth is None:
            auth = (
                _basic(parts.username, parts.password or "")
                if parts.username is not None
                else f"Bearer {api_key}"
            )
        self.headers = {
            "Host": netloc,
            "Accept-Encoding": "identity",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"pytest-openenv/{__version__} (http.client)",
        }
        if auth:
            self.headers["Authorization"] = auth
        self._context = ssl.create_default_context() if self.scheme == "https" else None
        self._proxy = self._proxy_for(netloc)
        target = self.path
        if self._proxy is not None and self.scheme == "http":
            # a plain-HTTP proxy takes the absolute URL, and its credentials on each request
            target = f"{self.where}{self.path}"
            if self._proxy.username is not None:
                self.headers["Proxy-Authorization"] = _basic(
                    self._proxy.username, self._proxy.password or ""
                )
        if any(LINE_BREAK.search(value) for value in self.headers.values()):
            # a header split in two would send the rest as a header of its own; the value is
            # not quoted: it may be the key
            raise ValueError(
                "the API key, the endpoint URL's credentials or the proxy's contain a line "
                "break: no HTTP header can carry them"
            )
        #: every request's bytes up to its length (one write per request)
        self._head = (
            f"POST {target} HTTP/1.1\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
            + "Content-Length: "
        ).encode("latin-1")
        self._idle: list[Link] = []
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
    def _connect(self, timeout: float) -> Link:
        """A new connection, through the proxy (a CONNECT tunnel for https) and TLS.

        ``http.client`` opens it (connect, tunnel, TLS with the host's name); the
        requests on it are framed here (``Link``).
        """
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
        conn.connect()
        sock = conn.sock
        assert sock is not None
        with contextlib.suppress(OSError):  # one write per request: no wait for an ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return Link(sock)

    def _checkout(self, timeout: float) -> tuple[Link, bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        return self._connect(timeout), False

    def _checkin(self, link: Link) -> None:
        with self._lock:
            self._idle.append(link)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            redirects, self._redirects = list(self._redirects.values()), {}
        for link in idle:
            link.close()
        for endpoint in redirects:
            endpoint.close()

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
                answer = self._follow(body, ends)
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

    def _follow(self, body: bytes, ends: float) -> Answer:
        """One attempt, through the 307/308 redirects it meets (as the SDK follows them).

        The body is sent again to the new URL; the key only to the same origin (scheme,
        host and port), as httpx strips ``Authorization`` from any other. 301, 302 and
        303 are answers: the SDK would re-send them as a GET, which no chat-completions
        endpoint answers.
        """
        endpoint: ChatEndpoint = self
        answer = self._attempt(body, ends)
        for _ in range(MAX_REDIRECTS):
            location = answer.headers.get("location")
            if answer.status_code not in (307, 308) or not location:
                return answer
            endpoint = endpoint._redirected(urllib.parse.urljoin(endpoint.url, location))
            answer = endpoint._attempt(body, ends)
        raise http.client.HTTPException(f"more than {MAX_REDIRECTS} redirects")

    def _redirected(self, url: str) -> ChatEndpoint:
        with self._lock:
            known = self._redirects.get(url)
        if known is not None:
            return known
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        same_origin = (scheme, parts.hostname or "", port) == (self.scheme, self.host, self.port)
        if scheme not in ("http", "https"):
            raise http.client.HTTPException(f"a redirect to a {scheme or 'relative'} URL")
        max_retries, on_attempt, max_bytes = self._settings
        endpoint = ChatEndpoint(
            url,
            "",
            max_retries=max_retries,
            on_attempt=on_attempt,
            max_bytes=max_bytes,
            resource=None,
            authorization=self.headers.get("Authorization", "") if same_origin else "",
        )
        with self._lock:
            evicted: list[ChatEndpoint] = []
            if len(self._redirects) >= MAX_REDIRECTS:  # a server that redirects everywhere
                evicted, self._redirects = list(self._redirects.values()), {}
            endpoint = self._redirects.setdefault(url, endpoint)
        for old in evicted:
            old.close()
        return endpoint

    def _attempt(self, body: bytes, ends: float) -> Answer:
        """One request sent (again on a new connection if a pooled one had gone stale)."""
        link, reused = self._checkout(_left(ends))
        if self._on_attempt is not None:
            self._on_attempt()
        request = b"%s%d\r\n\r\n%s" % (self._head, len(body), body)
        try:
            return self._exchange(link, request, ends)
        except STALE:
            link.close()
            if not reused:
                raise
        except BaseException:
            link.close()
            raise
        link = self._connect(_left(ends))
        try:
            return self._exchange(link, request, ends)
        except BaseException:
            link.close()
            raise

    def _exchange(self, link: Link, request: bytes, ends: float) -> Answer:
        link.send(request, ends)
        status, names, will_close = link.read_head(ends)
        size = names.get("content-length", "")
        if "chunked" in names.get("transfer-encoding", "").lower():
            body = link.read_chunked(ends, self._max_bytes, self.where)
        elif status in (204, 304):
            body = b""
        elif size:
            if not size.isdigit():
                raise http.client.HTTPException(f"the answer's Content-Length is {size!r}")
            if int(size) > self._max_bytes:
                raise too_large(self.where, f"Content-Length: {size}", self._max_bytes)
            body = link.read_exactly(int(size), ends)
        else:  # the body runs to the end of the connection
            will_close = True
            body = link.read_to_end(ends, self._max_bytes, self.where)
        if will_close:
            link.close()
        else:
            self._checkin(link)
        return Answer(status, names, body)

    @staticmethod
    def _error_body(answer: Answer) -> Any:
        return answer.decoded()


def _left(ends: float) -> float:
    left = ends - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


class Link:
    """One kept-alive connection and the bytes read past the last answer on it.

    HTTP/1.1 framing of our own: ``http.client`` parses each answer's headers with the
    ``email`` package and builds and checks every request header anew, most of the CPU
    of a request under the GIL (``bench/http_clients.py``). An answer here is a status
    line, headers up to a blank line, and a body by ``Content-Length``, chunks, or the
    end of the connection; every socket read is bounded by what is left of the attempt.
    """

    __slots__ = ("buffer", "kernel_timeouts", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""
        #: reads and writes bounded by SO_RCVTIMEO / SO_SNDTIMEO (see ``KERNEL_TIMEOUTS``)
        self.kernel_timeouts = KERNEL_TIMEOUTS and not isinstance(sock, ssl.SSLSocket)
        if self.kernel_timeouts:
            sock.settimeout(None)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _bound(self, ends: float, option: int) -> None:
        """The next read (``SO_RCVTIMEO``) or write (``SO_SNDTIMEO``) ends by ``ends``."""
        left = _left(ends)
        if self.kernel_timeouts:
            seconds = int(left)
            micros = int((left - seconds) * 1_000_000)
            if not seconds and not micros:  # a zero timeval is no bound at all
                micros = 1
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, option, TIMEVAL.pack(seconds, micros))
                return
            except OSError:  # a kernel without them (an emulated one): the socket's timeout
                self.kernel_timeouts = False
        self.sock.settimeout(left)

    def send(self, data: bytes, ends: float) -> None:
        """All of ``data``, by ``ends``: a kernel bound is per call, so each part sent
        bounds the next by what is left (a server that reads slowly cannot hold it)."""
        view = memoryview(data)
        while view:
            self._bound(ends, socket.SO_SNDTIMEO)
            try:
                sent = self.sock.send(view)
            except BlockingIOError:  # SO_SNDTIMEO ran out before a byte went
                raise TimeoutError from None
            view = view[sent:]

    def _recv(self, ends: float) -> bytes:
        self._bound(ends, socket.SO_RCVTIMEO)
        try:
            return self.sock.recv(READ_CHUNK)
        except BlockingIOError:  # SO_RCVTIMEO ran out before a byte arrived
            raise TimeoutError from None

    def read_head(self, ends: float) -> tuple[int, dict[str, str], bool]:
        """The status, the headers (lower-case names) and whether the server will close;
        informational (1xx) answers are read past."""
        while True:
            buffer = self.buffer
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end >= 0:
                    head, self.buffer = buffer[:end], buffer[end + 4 :]
                    break
                end = buffer.find(b"\n\n")  # bare line feeds, as http.client takes them
                if end >= 0:
                    head, self.buffer = buffer[:end], buffer[end + 2 :]
                    break
                if len(buffer) > MAX_HEAD:
                    raise http.client.LineTooLong("the answer's headers")
                chunk = self._recv(ends)
                if not chunk:
                    if not buffer:
                        raise http.client.RemoteDisconnected(
                            "Remote end closed connection without response"
                        )
                    raise http.client.IncompleteRead(buffer)
                buffer += chunk
            lines = head.split(b"\n")
            version, _, rest = lines[0].rstrip(b"\r").partition(b" ")
            code = rest[:3]
            if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
                raise http.client.BadStatusLine(repr(lines[0][:100]))
            status = int(code)
            names: dict[str, str] = {}
            for line in lines[1:]:
                name, colon, value = line.partition(b":")
                if colon:
                    names[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
            if 100 <= status < 200:
                continue
            connection = names.get("connection", "").lower()
            if version == b"HTTP/1.0":
                will_close = "keep-alive" not in connection
            else:
                will_close = "close" in connection
            return status, names, will_close

    def read_exactly(self, size: int, ends: float) -> bytes:
        buffer = self.buffer
        if len(buffer) >= size:
            self.buffer = buffer[size:]
            return buffer[:size]
        parts, have = [buffer], len(buffer)
        while have < size:
            chunk = self._recv(ends)
            if not chunk:
                raise http.client.IncompleteRead(b"".join(parts), size - have)
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self.buffer = data[size:]
        return data[:size]

    def read_to_end(self, ends: float, max_bytes: int, where: str) -> bytes:
        parts, have = [self.buffer], len(self.buffer)
        self.buffer = b""
        while True:
            if have > max_bytes:
                raise too_large(where, f"{have} bytes read", max_bytes)
            chunk = self._recv(ends)
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
            have += len(chunk)

    def _line(self, ends: float) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
                return line.rstrip(b"\r")
            if len(self.buffer) > MAX_HEAD:
                raise http.client.LineTooLong("a chunk size line")
            chunk = self._recv(ends)
            if not chunk:
                raise http.client.IncompleteRead(self.buffer)
            self.buffer += chunk

    def read_chunked(self, ends: float, max_bytes: int, where: str) -> bytes:
        parts: list[bytes] = []
        have = 0
        while True:
            line = self._line(ends)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise http.client.HTTPException(f"bad chunk size line {line[:40]!r}") from None
            if size == 0:
                while self._line(ends):  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            if have + size > max_bytes:  # said, not read: the size line alone says too much
                raise too_large(where, f"a chunk of {size} bytes announced after {have}", max_bytes)
            have += size
            parts.append(self.read_exactly(size, ends))
            self._line(ends)  # the chunk's own line end
