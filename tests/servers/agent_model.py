"""A chat-completions "model" for agent programs: it plays through whatever name the agent
gave the env's MCP tool (Claude Code ``mcp__openenv__play_move``, OpenCode
``openenv_play_move``, ...), so a real agent CLI plays tic-tac-toe through the capture proxy.

It plays the first legal move, as ``fake_model`` does; once the last tool result lists no
legal move (the game is over) it answers in text, and a request that offers no such tool
(an agent's side call: a title, a summary) gets a short text answer. Offered a generic
OpenEnv server's ``step`` tool instead, it echoes a message through ``mcp_echo``'s tool::

    with serve_agent_model() as server:
        run(f"--openenv-llm-endpoint={server.base_url}", "--openenv-policy=agent:codex", ...)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from .fake_model import LEGAL, Decision, Faults
from .openai_compat import OpenAICompatServer, _text

GAME_OVER = "The game is over."


def env_tool_name(body: dict[str, Any], suffix: str = "play_move") -> str | None:
    """The offered tool whose name ends with ``suffix`` (the agent's name for the env's)."""
    for tool in body.get("tools") or []:
        name = str((tool.get("function") or {}).get("name") or tool.get("name") or "")
        if name.endswith(suffix):
            return name
    return None


#: what the model sends an MCP-style env (``openenv_servers``' ``mcp_echo``) through its one
#: generic ``step`` tool
ECHO_CALL = {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hello"}}


class AgentModelServer(OpenAICompatServer):
    def completion(self, body: dict[str, Any], decision: Decision, usage: tuple[int, int]) -> Any:
        name = env_tool_name(body)
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        step = env_tool_name(body, "_step")  # a generic OpenEnv server's one tool
        if name is None and step is not None:
            if last.get("role") == "tool":
                decision = Decision("Done.", ())
            else:
                decision = Decision("", ((step, json.dumps(ECHO_CALL)),))
        elif name is None:
            decision = Decision("ok", ())
        elif last.get("role") == "tool" and not LEGAL.search(_text(last.get("content"))):
            decision = Decision(GAME_OVER, ())
        else:
            decision = Decision(decision.text, tuple((name, args) for _, args in decision.calls))
        return super().completion(body, decision, usage)


@contextlib.contextmanager
def serve_agent_model(faults: Faults | None = None, **kwargs: Any) -> Iterator[AgentModelServer]:
    server = AgentModelServer(faults, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()
