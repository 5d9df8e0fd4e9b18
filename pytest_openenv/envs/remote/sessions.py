"""Open WebSocket sessions kept between episodes, per server, for the next episode to reset.

A new session costs a TCP (and, for a hosted Space, TLS) handshake, an HTTP
upgrade and a fresh env on the server; resetting an open one costs one message.
OpenEnv's own client keeps its session across resets the same way.

Sessions are kept only where that cannot cost another episode a session:

* not in an xdist worker: one worker reusing its sessions back to back could
  keep a server with few sessions busy while another worker waits for one;
* not for a server that has refused this process a session for capacity: there
  sessions are scarce, so each episode gives its session back to the server.

A session is handed back only between whole requests (nothing in flight), so
the next episode can never read an answer meant for the last one.

Both pools belong to the process's ``RemoteServers`` (``servers.py``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from ...util.endpoints import ServerURL


class IdleSessions:
    """Open sessions between episodes, per server; keeps none until ``enabled``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[ServerURL, list[Any]] = {}
        self._crowded: set[ServerURL] = set()
        #: switched on per process by the plugin (never in xdist workers)
        self.enabled = False

    def take(self, server: ServerURL) -> Any | None:
        with self._lock:
            idle = self._idle.get(server)
            return idle.pop() if idle else None

    def give(self, server: ServerURL, connection: Any) -> bool:
        """Keep ``connection`` for the next episode; False: the caller closes it."""
        with self._lock:
            if not self.enabled or server in self._crowded:
                return False
            self._idle.setdefault(server, []).append(connection)
            return True

    def crowded(self, server: ServerURL) -> None:
        """``server`` refused a session for capacity: keep none of its sessions from now on."""
        with self._lock:
            self._crowded.add(server)
            idle = self._idle.pop(server, [])
        for connection in idle:
            end(connection)

    def close_all(self) -> None:
        """At the end of the run: give every kept session back to its server."""
        with self._lock:
            idle = [c for connections in self._idle.values() for c in connections]
            self._idle.clear()
            self._crowded.clear()
            self.enabled = False
        for connection in idle:
            end(connection)

    def count(self) -> int:
        with self._lock:
            return sum(len(connections) for connections in self._idle.values())

    @contextlib.contextmanager
    def enabled_while(self, enabled: bool) -> Iterator[None]:
        """``enabled`` for the block only (the preflight's probe hands its session on or not)."""
        with self._lock:
            was, self.enabled = self.enabled, enabled
        try:
            yield
        finally:
            with self._lock:
                self.enabled = was


class SessionStates:
    """Each open session's ``state`` frame, asked once per session: a kept session serves one
    env, so the next episode that resets it need not ask again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: weakref.WeakKeyDictionary[Any, dict[str, Any] | None] = (
            weakref.WeakKeyDictionary()
        )

    def known(self, connection: Any) -> tuple[bool, dict[str, Any] | None]:
        """(asked before, its state); a state may be None (the server would not say)."""
        with self._lock:
            return connection in self._states, self._states.get(connection)

    def remember(self, connection: Any, state: dict[str, Any] | None) -> None:
        with self._lock:
            self._states[connection] = state


def end(connection: Any) -> None:
    """Say goodbye the protocol's way, then close; a dead connection is fine too."""
    with contextlib.suppress(Exception):
        connection.send(json.dumps({"type": "close"}))
    with contextlib.suppress(Exception):
        connection.close()
