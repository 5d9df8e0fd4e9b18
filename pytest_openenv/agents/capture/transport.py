"""How the proxy's upstream request travels: a small interface, so the HTTP client can change.

A ``Transport`` posts a JSON body to a URL with the headers it was made with and gives back
the status and the whole body, within its timeout counted over the whole request. Its
failures are ``UpstreamError``: 504 when the time ran out, 502 when the endpoint could not
be reached or its answer was too large. Messages may quote the URL; the caller scrubs them.

``bench/capture_proxy.py`` measures each transport's CPU per call side by side; the default
is the one with the lower figure (``DEFAULT_TRANSPORT``).
"""

from __future__ import annotations

from typing import Protocol

from ...errors import UpstreamError

__all__ = ["Transport", "UpstreamError"]

#: the transport an ``Upstream`` uses unless it names another
DEFAULT_TRANSPORT = "http.client"


class Transport(Protocol):
    """Thread-safe: the proxy's threads share one."""

    def post(self, url: str, body: bytes) -> tuple[int, bytes]:
        """(status, body) of the answer to ``POST url``; raises ``UpstreamError``."""
        ...

    def close(self) -> None: ...
