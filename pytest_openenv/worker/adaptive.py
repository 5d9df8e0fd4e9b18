"""Worker side: ``--openenv-concurrency auto``, episodes in flight that follow the endpoint.

A fixed C is a guess about a server one rarely knows: too low wastes the run's
time, too high fills a rate limit with 429s or a deployed env server with
``CAPACITY_REACHED`` refusals. ``AdaptiveLimit`` starts at ``AUTO_START`` episodes
in flight and, like TCP's congestion window, grows additively and halves:

* after each round (as many finished episodes as the limit allows in flight), it
  takes the round's median seconds per turn; while that stays within
  ``LATENCY_TOLERANCE`` of the best round seen, the limit grows by one, up to
  ``AUTO_CEILING``; a round slower than that holds the limit where it is;
* an overload signal (an HTTP 429 or 503 from the model endpoint, even one the
  SDK retries; a ``CAPACITY_REACHED`` from an env server; a timeout) halves it, at
  most once per round, so one burst of refusals is one cut, not one per request.

Signals come from wherever the process sees them: the policies and env backends
fire the process's ``util.overload.OverloadSignal``, which the run-ahead's limit
listens to (``Runahead``: one per pytest process).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..config.convert import AUTO, AUTO_CEILING, AUTO_START, concurrency_ceiling

__all__ = ["AUTO", "AUTO_CEILING", "AUTO_START", "AdaptiveLimit", "concurrency_ceiling"]

#: a round whose median seconds per turn exceeds the best round's times this stops growth
LATENCY_TOLERANCE = 1.5


class AdaptiveLimit:
    """Episodes allowed in flight: additive increase while latency holds, halve on overload."""

    def __init__(
        self,
        *,
        start: int = AUTO_START,
        ceiling: int = AUTO_CEILING,
        on_change: Callable[[int], None] | None = None,
    ) -> None:
        self.ceiling = ceiling
        self.limit = min(start, ceiling)
        self.peak = self.limit
        self.cuts = 0
        self.best: float | None = None
        self._on_change = on_change
        self._round: list[float] = []
        #: finished episodes still to come before another cut is taken
        self._cooldown = 0
        self._lock = threading.Lock()

    def observe(self, seconds_per_turn: float) -> None:
        """One finished episode's wall time per turn."""
        with self._lock:
            self._cooldown = max(0, self._cooldown - 1)
            self._round.append(seconds_per_turn)
            if len(self._round) < self.limit:
                return
            typical = sorted(self._round)[len(self._round) // 2]
            self._round.clear()
            if self.best is None or typical < self.best:
                self.best = typical
            if typical <= LATENCY_TOLERANCE * self.best and self.limit < self.ceiling:
                self._set(self.limit + 1)

    def overloaded(self) -> None:
        """The endpoint refused or timed out: halve, once per round."""
        with self._lock:
            if self._cooldown:
                return
            self.cuts += 1
            self._round.clear()  # latencies measured at the old limit say nothing now
            self._set(max(1, self.limit // 2))
            self._cooldown = self.limit

    def _set(self, limit: int) -> None:
        self.limit = limit
        self.peak = max(self.peak, limit)
        if self._on_change is not None:
            self._on_change(limit)

    def describe(self) -> str:
        return (
            f"--openenv-concurrency=auto: {self.limit} episodes in flight at the end "
            f"(peak {self.peak}, ceiling {self.ceiling}, halved {self.cuts} time(s))"
        )
