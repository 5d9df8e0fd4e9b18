"""The overload signal: an endpoint pushed back, so whoever listens should send less.

Endpoints push back in several layers: a model endpoint answers 429 or 503 (even ones
the SDK retries), an env server refuses a session (``CAPACITY_REACHED``), an episode
outlives its budget. The policies and backends that see it fire the signal; the
worker's ``--openenv-concurrency auto`` limit listens to it. The signal sits below
both, so neither imports the other: the worker makes one per process and hands it
to what it builds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: HTTP statuses that mean "send less": rate limited, overloaded
OVERLOAD_STATUSES = (429, 503)


class OverloadSignal:
    """Thread-safe fan-out of "an endpoint pushed back" to its listeners."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: tuple[Callable[[], None], ...] = ()
        #: pushbacks fired so far (a figure for tests and summaries)
        self.fired = 0

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` on every pushback from now on."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def fire(self) -> None:
        """An endpoint refused, rate-limited or timed out."""
        with self._lock:
            self.fired += 1
            listeners = self._listeners
        for listener in listeners:
            listener()

    def observe_response(self, response: Any) -> None:
        """httpx response hook: 429/503 answers are pushback, also the ones the SDK retries."""
        if getattr(response, "status_code", None) in OVERLOAD_STATUSES:
            self.fire()
