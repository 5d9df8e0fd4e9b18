"""The upstream reached with the standard library: sockets kept alive, ``http.client`` reading.

Each upstream host (scheme, host, port) has a pool of idle connections, taken last in, first
out, so a process holds at most as many as it had calls in flight at once. A request is one
write of bytes framed here (a POST with fixed headers needs no more); ``http.client``'s
``HTTPResponse`` reads the answer (status, headers, Content-Length, chunks, keep-alive).

The timeout bounds the whole request, connect to last body byte: every socket operation is
given what is left of it, so an endpoint that trickles its answer a byte at a time cannot
hold a call past it. https uses ``ssl.create_default_context()`` (the system's CAs, or
``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` as OpenSSL reads them).
"""

from __future__ import annotations

import contextlib
import http.client
import io
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass

from ...errors import BadInput
from .transport import UpstreamError

#: idle connections kept per host; more are closed when given back
MAX_IDLE = 64
#: a pooled connection's server may have closed it while it sat idle: the request never
#: reached the server, so it is sent once more on a new connection
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)
LINE_BREAK = re.compile(r"[\r\n]")


@dataclass(frozen=True)
class _Target:
    tls: bool
    host: str
    port: int
    #: the request line's target and the Host header
    path: str
    netloc: str

    @classmethod
    def of(cls, url: str) -> _Target:
        parts = urllib.parse.urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamError(502, f"the model endpoint's URL {url!r} is not http(s)://HOST/...")
        host = parts.hostname
        netloc = f"[{host}]" if ":" in host else host
        if parts.port:
            netloc += f":{parts.port}"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        port = parts.port or (443 if scheme == "https" else 80)
        return cls(scheme == "https", host, port, path, netloc)


def _left(ends: float) -> float:
    left = ends - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


class _DeadlineReads(io.RawIOBase):
    """A socket's reads, each bounded by what is left of the request's time."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.ends = 0.0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        self.sock.settimeout(_left(self.ends))
        return self.sock.recv_into(buffer)


class _KeptReader(io.BufferedReader):
    """The connection's one buffered reader: ``HTTPResponse`` closes its file after each
    answer, but bytes read ahead belong to the connection, so closing is the link's."""

    def close(self) -> None:
        pass


class _Link:
    """One kept-alive connection; ``HTTPResponse`` takes it for a socket (``makefile``)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reads = _DeadlineReads(sock)
        self.reader = _KeptReader(self.reads)

    def makefile(self, mode: str) -> _KeptReader:
        return self.reader

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class HTTPClientTransport:
    def __init__(self, headers: dict[str, str], timeout: float, max_bytes: int) -> None:
        if any(LINE_BREAK.search(f"{name}{value}") for name, value in headers.items()):
            # a header split in two would send the rest as a header of its own; the value
            # is not quoted: it may be the key
            raise BadInput(
                "a header for the model endpoint (its key?) contains a line break: no HTTP "
                "header can carry it"
            )
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._targets: dict[str, _Target] = {}
        self._idle: dict[tuple[bool, str, int], list[_Link]] = {}
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._closed = False

    def post(self, url: str, body: bytes) -> tuple[int, bytes]:
        ends = time.monotonic() + self._timeout
        target = self._targets.get(url)
        if target is None:
            target = self._targets.setdefault(url, _Target.of(url))
        request = (
            f"POST {target.path} HTTP/1.1\r\nHost: {target.netloc}\r\n{self._headers}"
            f"Accept-Encoding: identity\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        try:
            return self._send(target, request, ends)
        except TimeoutError as exc:
            raise UpstreamError(
                504, f"the model endpoint gave no whole answer within {self._timeout:g}s"
            ) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise UpstreamError(
                502, f"the model endpoint is unreachable: {type(exc).__name__}: {exc}"
            ) from exc

    def _send(self, target: _Target, request: bytes, ends: float) -> tuple[int, bytes]:
        link = self._checkout(target)
        if link is not None:
            try:
                return self._exchange(target, link, request, ends)
            except STALE:
                link.close()
            except BaseException:
                link.close()
                raise
        link = self._connect(target, ends)
        try:
            return self._exchange(target, link, request, ends)
        except BaseException:
            link.close()
            raise

    def _exchange(
        self, target: _Target, link: _Link, request: bytes, ends: float
    ) -> tuple[int, bytes]:
        link.sock.settimeout(_left(ends))
        link.sock.sendall(request)
        link.reads.ends = ends
        answer = http.client.HTTPResponse(link, method="POST")  # type: ignore[arg-type]
        answer.begin()
        if answer.length is not None and answer.length > self._max_bytes:
            raise UpstreamError(502, self._too_large(f"Content-Length: {answer.length}"))
        body = answer.read(self._max_bytes + 1)
        if len(body) > self._max_bytes:
            raise UpstreamError(502, self._too_large(f"{len(body)} bytes read"))
        if answer.will_close or not answer.isclosed():
            link.close()
        else:
            self._checkin(target, link)
        return answer.status, body

    def _too_large(self, said: str) -> str:
        return f"the model endpoint answered over {self._max_bytes} bytes ({said})"

    def _connect(self, target: _Target, ends: float) -> _Link:
        sock = socket.create_connection((target.host, target.port), timeout=_left(ends))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if target.tls:
                sock.settimeout(_left(ends))
                sock = self._tls().wrap_socket(sock, server_hostname=target.host)
        except BaseException:
            sock.close()
            raise
        return _Link(sock)

    def _tls(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = ssl.create_default_context()
            return self._context

    def _checkout(self, target: _Target) -> _Link | None:
        with self._lock:
            idle = self._idle.get((target.tls, target.host, target.port))
            return idle.pop() if idle else None

    def _checkin(self, target: _Target, link: _Link) -> None:
        with self._lock:
            idle = self._idle.setdefault((target.tls, target.host, target.port), [])
            if not self._closed and len(idle) < MAX_IDLE:
                idle.append(link)
                return
        link.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pools, self._idle = list(self._idle.values()), {}
        for idle in pools:
            for link in idle:
                link.close()
