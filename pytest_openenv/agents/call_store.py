"""Where an agent's model calls may be answered before the upstream: a store that knows
which episode each call belongs to (a response cache keyed by episode, a replay).

The capture proxy is shared by the episodes in flight and its ``forward`` hook sees only
the chat-form request, so ``KeyedProxy`` tells the store whose call its handler thread is
serving (by the episode's proxy token) for the length of that call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .capture import CaptureProxy, ChatAnswer, ProxySession, Upstream
from .capture.dialects import Dialect
from .capture.server import Complete


class CallStore(Protocol):
    """Answers a call itself or through ``complete``; raises the capture package's
    ``UpstreamError`` for an answer the agent must not get (a replay miss)."""

    def begin(self, token: str, episode_id: str, root: Path) -> None:
        """The episode ``episode_id`` calls with ``token``; ``root`` is its own folder (a
        path the agent's requests may quote, which differs on every run)."""

    def end(self, token: str) -> None: ...

    def forward(
        self, token: str, request: dict[str, Any], complete: Complete
    ) -> tuple[ChatAnswer, float]: ...


class KeyedProxy(CaptureProxy):
    """A capture proxy whose calls go through ``store`` with their episode's token."""

    def __init__(self, upstream: Upstream, store: CallStore) -> None:
        super().__init__(upstream, forward=self._forward)
        self.store = store
        self._serving = threading.local()

    def _forward(self, request: dict[str, Any], complete: Complete) -> tuple[ChatAnswer, float]:
        return self.store.forward(self._serving.token, request, complete)

    @contextlib.contextmanager
    def _serving_token(self, token: str) -> Iterator[None]:
        self._serving.token = token
        try:
            yield
        finally:
            self._serving.token = None

    def handle_call(
        self, session: ProxySession, dialect: Dialect, body: dict[str, Any]
    ) -> tuple[int, Any]:
        with self._serving_token(session.token):
            return super().handle_call(session, dialect, body)
