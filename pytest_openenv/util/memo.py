"""``BoundedMemo``: the one shape of every cache kept across episodes.

Each value is a pure function of its key (a parsed argument text, a drawn board, a
searched best move), so any thread may compute a missing value and keep it, and
two threads computing the same one agree. Past ``limit`` entries new values are
still returned but no longer kept: keys a model or a server makes up cannot grow a
process without bound.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """A thread-safe cache of at most ``limit`` entries, never evicting (see the module)."""

    __slots__ = ("_lock", "_values", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"a memo's limit is a count of entries, got {limit}")
        self.limit = limit
        self._values: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        return self._values.get(key)  # one dict read: atomic, so no lock on the hot path

    def keep(self, key: K, value: V) -> V:
        """Remember ``value`` for ``key`` while there is room; returns the value to use."""
        with self._lock:
            if key in self._values:
                return self._values[key]
            if len(self._values) < self.limit:
                self._values[key] = value
        return value

    def __len__(self) -> int:
        return len(self._values)
