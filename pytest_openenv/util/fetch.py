"""One bounded ``GET`` for every plain HTTP request made outside the model client.

The checks before a run (``GET /health``, ``/metadata``, ``/schema`` of env servers,
``GET /models`` of model endpoints), the Hub's whoami and the health probes of benched
servers all go through ``fetch``:

* one wall-clock bound on the whole request: connect, TLS, headers, body and redirects.
  A socket timeout bounds each read only, and a server that trickles one byte per read
  would hold the run for ever. The request runs on a daemon thread the caller waits for;
  at the bound its socket is shut and the caller gets ``ServerUnreachable``. A Ctrl-C
  ends the caller's wait at once, and the abandoned thread never holds the exit.
* redirects (301, 302, 303, 307, 308) followed, up to ``MAX_REDIRECTS``; credentials
  (``Authorization``, ``x-api-key``, ``Cookie``) go only to the origin (scheme, host,
  port) they were given for, as browsers and httpx do;
* every transport failure (refused, reset, TLS, a garbled status line, chunk or
  body) is one ``ServerUnreachable`` saying what happened;
* proxies where urllib finds them (``HTTP(S)_PROXY``, ``NO_PROXY``), never for a
  loopback host.

``each_at_once`` runs such requests side by side on daemon threads, for the same reason.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .._version import __version__
from ..errors import ServerUnreachable

#: redirects one request follows (urllib's own limit)
MAX_REDIRECTS = 10
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: headers (lower case) that only the origin they were given for may receive
CREDENTIALS = frozenset({"authorization", "x-api-key", "cookie"})
DEFAULT_PORTS = {"http": 80, "https": 443}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: what ends one request: everything a socket, TLS or http.client's parsing raises
TRANSPORT_ERRORS = (OSError, http.client.HTTPException, ValueError)

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Fetched:
    """The final answer of one ``GET``, after its redirects."""

    status: int
    reason: str
    #: at most ``max_bytes + 1`` bytes: longer means the answer was longer than allowed
    body: bytes


def fetch(url: str, headers: Mapping[str, str], *, timeout: float, max_bytes: int) -> Fetched:
    """``GET url`` (no credentials in it: they go in ``headers``), all of it within
    ``timeout`` seconds; raises ``ServerUnreachable`` with a message that holds no header."""
    exchange = _Exchange(url, dict(headers), timeout, max_bytes)
    if timeout <= 0:
        raise ServerUnreachable(exchange.late())
    thread = threading.Thread(target=exchange.run, name="pytest-openenv-fetch", daemon=True)
    thread.start()
    try:
        finished = exchange.done.wait(timeout)
    except BaseException:  # a Ctrl-C: the server sees the connection end too
        exchange.abandon()
        raise
    if not finished:
        exchange.abandon()
        raise ServerUnreachable(exchange.late())
    return exchange.outcome()


def each_at_once(work: Callable[[T], R], items: Sequence[T], *, most: int = 16) -> list[R]:
    """``work`` on every item, up to ``most`` at a time, the results in the items' order.

    The threads are daemons: a Ctrl-C ends the wait at once, where a ``ThreadPoolExecutor``
    would wait for its threads on the way out (at exit too).
    """
    results: dict[int, R] = {}
    failures: dict[int, BaseException] = {}
    queue = iter(enumerate(items))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                index, item = next(queue, (-1, None))
            if index < 0:
                return
            try:
                results[index] = work(item)  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the waiting thread, raised there
                failures[index] = exc

    threads = [
        threading.Thread(target=worker, name="pytest-openenv-check", daemon=True)
        for _ in range(min(most, len(items)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[min(failures)]
    return [results[index] for index in range(len(items))]


def _basic(user: str, password: str) -> str:
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    return "Basic " + base64.b64encode(token).decode("ascii")


def _origin(url: str) -> tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme, 0)


def _proxy_for(scheme: str, host: str, netloc: str) -> urllib.parse.SplitResult | None:
    """The proxy urllib would use for this host (none for a loopback one)."""
    if host in LOOPBACK_HOSTS or urllib.request.proxy_bypass(netloc):
        return None
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy:
        return None
    return urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)


def describe(exc: BaseException) -> str:
    """What a transport failure was, in words that quote no header value."""
    if isinstance(exc, http.client.HTTPException):
        name, text = type(exc).__name__, str(exc)
        return f"a broken HTTP answer ({text if text.startswith(name) else f'{name}: {text}'})"
    if isinstance(exc, OSError):
        return str(exc) or type(exc).__name__
    # http.client quotes a header value it refuses, and the value may be a key
    return f"the request could not be sent ({type(exc).__name__})"


class _Exchange:
    """One ``GET`` and its redirects, run on its own thread; see ``fetch``."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float, max_bytes: int) -> None:
        self.url = url
        self.headers = headers
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self._abandoned = False
        self._answer: Fetched | None = None
        self._failure: Exception | None = None

    def late(self) -> str:
        return f"no whole answer within {self.timeout:g} s"

    def run(self) -> None:
        try:
            self._answer = self._follow()
        except Exception as exc:  # handed to the waiting thread
            self._failure = exc
        finally:
            self.done.set()

    def abandon(self) -> None:
        """The caller stopped waiting: shut the socket, so a trickled read ends now."""
        with self._lock:
            self._abandoned = True
            connection = self._connection
        sock = connection.sock if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                # the plain socket's shutdown, also under TLS: it wakes a blocked read
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def outcome(self) -> Fetched:
        if self._answer is not None:
            return self._answer
        failure = self._failure
        if isinstance(failure, ServerUnreachable):
            raise failure
        if isinstance(failure, TimeoutError):
            raise ServerUnreachable(self.late()) from None
        if isinstance(failure, TRANSPORT_ERRORS):
            raise ServerUnreachable(describe(failure)) from None
        assert failure is not None
        raise failure

    def _hold(self, connection: http.client.HTTPConnection) -> None:
        """``connection`` is the one to shut if abandoned; abandoned already, stop."""
        with self._lock:
            self._connection = connection
            if self._abandoned:
                raise TimeoutError

    def _follow(self) -> Fetched:
        url, headers = self.url, self.headers
        for _ in range(MAX_REDIRECTS + 1):
            answer, location = self._get(url, headers)
            if answer.status not in REDIRECTS or not location:
                return answer
            target = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(target).scheme.lower() not in DEFAULT_PORTS:
                raise ServerUnreachable(f"HTTP {answer.status} redirects to no http(s) URL")
            if _origin(target) != _origin(url):
                headers = {k: v for k, v in headers.items() if k.lower() not in CREDENTIALS}
            url = target
        raise ServerUnreachable(f"more than {MAX_REDIRECTS} redirects")

    def _get(self, url: str, headers: dict[str, str]) -> tuple[Fetched, str | None]:
        parts = urllib.parse.urlsplit(url)
        scheme, host = parts.scheme.lower(), parts.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        sent = {"User-Agent": f"pytest-openenv/{__version__}", **headers}
        route = _Route.to(scheme, host, parts.port or DEFAULT_PORTS[scheme], netloc, self.timeout)
        if route.plain_proxy:  # it takes the absolute URL, and its credentials on the request
            target = f"http://{netloc}{target}"
            if route.proxy_authorization:
                sent["Proxy-Authorization"] = route.proxy_authorization
        connection = route.connection
        self._hold(connection)
        try:
            connection.connect()
            self._hold(connection)  # abandoned while connecting: stop here
            connection.request("GET", target, headers=sent)
            response = connection.getresponse()
            body = response.read(self.max_bytes + 1)
            return Fetched(response.status, response.reason, body), response.getheader("Location")
        finally:
            connection.close()


@dataclass(frozen=True)
class _Route:
    """How to reach a host: straight, through a plain HTTP proxy, or a CONNECT tunnel."""

    connection: http.client.HTTPConnection
    plain_proxy: bool = False
    proxy_authorization: str = ""

    @classmethod
    def to(cls, scheme: str, host: str, port: int, netloc: str, timeout: float) -> _Route:
        proxy = _proxy_for(scheme, host, netloc)
        if proxy is None:
            if scheme == "https":
                context = ssl.create_default_context()
                return cls(
                    http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
                )
            return cls(http.client.HTTPConnection(host, port, timeout=timeout))
        authorization = (
            _basic(proxy.username, proxy.password or "") if proxy.username is not None else ""
        )
        proxy_host, proxy_port = proxy.hostname or "", proxy.port or 80
        if scheme == "https":
            connection = http.client.HTTPSConnection(
                proxy_host, proxy_port, timeout=timeout, context=ssl.create_default_context()
            )
            tunnel = {"Proxy-Authorization": authorization} if authorization else None
            connection.set_tunnel(host, port, headers=tunnel)
            return cls(connection, proxy_authorization=authorization)
        connection = http.client.HTTPConnection(proxy_host, proxy_port, timeout=timeout)
        return cls(connection, plain_proxy=True, proxy_authorization=authorization)
