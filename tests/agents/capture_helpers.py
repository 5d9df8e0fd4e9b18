"""Shared pieces of the capture proxy's tests: a proxy in front of one of our model servers.

The fake model (``servers.fake_model``) plays the first legal move it reads in the
conversation ("Legal actions: 3, 4") through the ``play_move`` tool, so a request that
offers that tool gets a tool call back whatever dialect carried it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from servers.anthropic_messages import AnthropicMessagesServer
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

from pytest_openenv.agents.capture import CaptureProxy, Upstream

#: the upstream key the tests put in the proxy's environment (long enough to be scrubbed)
KEY_ENV = "CAPTURE_TEST_UPSTREAM_KEY"
KEY = "sk-upstream-secret-0123456789abcdef"
UPSTREAM_MODEL = "upstream-model"

PLAY_MOVE = {
    "type": "function",
    "function": {
        "name": "play_move",
        "description": "Play one legal action.",
        "parameters": {
            "type": "object",
            "properties": {"action_id": {"type": "integer"}},
            "required": ["action_id"],
        },
    },
}
TASK = "You play tic-tac-toe. Legal actions: 3, 4, 8"


@contextlib.contextmanager
def proxy_to(
    kind: str, faults: Faults | None = None, model_server: type | None = None, **upstream: Any
) -> Iterator[tuple[CaptureProxy, Any]]:
    """A started proxy whose upstream is a fresh model server of ``kind`` (chat, anthropic);
    ``model_server``: another class of ours speaking that dialect."""
    default = OpenAICompatServer if kind == "chat" else AnthropicMessagesServer
    server = (model_server or default)(faults).start()
    settings = {"api_key_env": KEY_ENV, "model": UPSTREAM_MODEL, "timeout": 10.0, **upstream}
    proxy = CaptureProxy(Upstream(base_url=server.base_url, dialect=kind, **settings))
    try:
        proxy.start()
        yield proxy, server
    finally:
        proxy.close()
        server.stop()


@pytest.fixture(name="upstream_key")
def upstream_key_fixture(monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY
