"""Which deployed servers ignore the reset seed, as the controller found before the run.

OpenEnv's server passes ``seed`` to an env's ``reset`` only if its signature has
one; OpenEnv's own openspiel env has none, so the seed is silently dropped and
"the same seed, the same episode" is untrue there. ``preflight.check_sessions``
probes each server and marks what it found on the controller's ``RemoteServers``:
shown to ignore the seed, or not told apart (the family had no move to probe with
and the reset alone proves nothing). xdist hands both lists to each worker
(``workerinput``); every record from such a server says ``extra.seeded: false``,
or ``null`` when the probe could not tell.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class UnseededServers:
    """Public URLs (no credentials) of servers shown to ignore the seed, and of servers
    whose seeding the probe could not tell."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: frozenset[str] = frozenset()
        self._unknown: frozenset[str] = frozenset()

    def add(self, servers: Iterable[str]) -> None:
        with self._lock:
            self._servers = self._servers | frozenset(servers)

    def add_unknown(self, servers: Iterable[str]) -> None:
        with self._lock:
            self._unknown = self._unknown | frozenset(servers)

    def listed(self) -> list[str]:
        """Sorted, as a worker is told them."""
        return sorted(self._servers)

    def unknown_listed(self) -> list[str]:
        return sorted(self._unknown - self._servers)

    def seeded(self, server: str | None) -> bool | None:
        """False for an episode on a server that ignores the seed, None where the probe could
        not tell; embedded engines honour it."""
        if server is None:
            return True
        if server in self._servers:
            return False
        return None if server in self._unknown else True
