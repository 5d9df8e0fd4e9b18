"""The capture proxy: agents' model calls, answered by the run's model and recorded.

An agent program (Claude Code, Codex, OpenCode ...) is pointed at ``CaptureProxy``'s base
URL with a per-episode token as its key. It speaks its own dialect (Chat Completions,
Responses or Anthropic Messages, streaming or not); the proxy translates each call to the
chat form, sends it to the ``Upstream`` (an OpenAI-compatible server or the Anthropic API)
with the real key, answers in the agent's dialect, and records a ``CapturedCall``.
``conversation`` makes the row's messages from the calls.
"""

from .records import CapturedCall, ChatAnswer, conversation, main_call, side_calls
from .server import CaptureProxy, ProxySession
from .upstream import Upstream, UpstreamError

__all__ = [
    "CaptureProxy",
    "CapturedCall",
    "ChatAnswer",
    "ProxySession",
    "Upstream",
    "UpstreamError",
    "conversation",
    "main_call",
    "side_calls",
]
