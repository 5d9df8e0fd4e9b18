"""Which deployed servers ignore the reset seed, as the controller found before the run.

OpenEnv's server passes ``seed`` to an env's ``reset`` only if its signature has
one; OpenEnv's own openspiel env has none, so the seed is silently dropped and
"the same seed, the same episode" is untrue there. ``preflight.check_seeding``
marks such servers on the controller's ``RemoteServers``; xdist hands the list to
each worker (``workerinput``); every record from such a server says
``extra.seeded: false``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class UnseededServers:
    """Public URLs (no credentials) of servers shown to ignore the seed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: frozenset[str] = frozenset()

    def add(self, servers: Iterable[str]) -> None:
        with self._lock:
            self._servers = self._servers | frozenset(servers)

    def listed(self) -> list[str]:
        """Sorted, as a worker is told them."""
        return sorted(self._servers)

    def seeded(self, server: str | None) -> bool:
        """False for an episode on a server that ignores the seed; embedded engines honour it."""
        return server is None or server not in self._servers
