"""What the proxy keeps of each model call, and the row's conversation made from them.

Every record is in the OpenAI chat form the plugin's rows use, whatever dialect the agent
spoke and whatever the upstream answered in: ``system`` / ``user`` / ``assistant`` (with
``tool_calls``, arguments as JSON text) / ``tool`` (with ``tool_call_id``) messages, and
tool definitions as ``{"type": "function", "function": {...}}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ChatAnswer:
    """One upstream answer in chat form: the assistant message and what came with it."""

    message: dict[str, Any]
    finish_reason: str
    #: ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` as the upstream counted
    usage: dict[str, int]
    id: str
    model: str


@dataclass
class CapturedCall:
    """One request the agent made, as the upstream model saw it, and its answer."""

    #: what the agent spoke: ``chat``, ``responses`` or ``anthropic``
    dialect: str
    #: the request's messages as sent upstream, in chat form
    request_messages: list[dict[str, Any]]
    #: the request's tool definitions, in chat form
    tools: list[dict[str, Any]]
    #: the assistant message answered (``{}`` when the call got no answer)
    response_message: dict[str, Any]
    usage: dict[str, int] = field(default_factory=dict)
    #: the HTTP status the agent got
    status: int = 200
    #: why the call got no answer (scrubbed of the upstream key), None when it got one
    error: str | None = None
    #: wall time of the upstream request
    seconds: float = 0.0
    #: the model id the agent asked for (the upstream's replaces it)
    agent_model: str = ""
    #: whether the agent asked for a stream
    stream: bool = False
    #: ``time.monotonic()`` when the request arrived: the first one ends the agent's start-up
    received: float = 0.0

    @property
    def answered(self) -> bool:
        return self.status == 200 and self.error is None


def _is_prefix(short: Sequence[dict[str, Any]], long: Sequence[dict[str, Any]]) -> bool:
    return len(short) <= len(long) and all(a == b for a, b in zip(short, long, strict=False))


def main_call(calls: Sequence[CapturedCall]) -> CapturedCall | None:
    """The answered call that saw the longest conversation (the later one on a tie).

    An agent's main thread grows by whole turns, so its last call's request holds every
    earlier one's. Side calls (a title or summary asked of a small model, a sub-agent's own
    thread) start conversations of their own, shorter than the main one; they stay in
    ``calls`` but are not the row's conversation. A thread the agent compacted (its history
    replaced by a summary) is shorter after the compaction, so the row keeps the longer
    conversation before it.
    """
    best: CapturedCall | None = None
    for call in calls:
        if call.answered and (
            best is None or len(call.request_messages) >= len(best.request_messages)
        ):
            best = call
    return best


def side_calls(calls: Sequence[CapturedCall]) -> list[CapturedCall]:
    """The answered calls whose request is not a prefix of the main conversation."""
    main = main_call(calls)
    if main is None:
        return []
    thread = [*main.request_messages, main.response_message]
    return [c for c in calls if c.answered and not _is_prefix(c.request_messages, thread)]


def conversation(
    calls: Sequence[CapturedCall],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) of the row: ``main_call``'s request and its answer.

    ``([], [])`` when no call was answered: the model then saw no conversation it answered.
    """
    main = main_call(calls)
    if main is None:
        return [], []
    return [*main.request_messages, main.response_message], list(main.tools)


def summed_usage(calls: Sequence[CapturedCall]) -> tuple[int, int]:
    """(prompt tokens, completion tokens) over every call, side calls included."""
    prompt = sum(int(c.usage.get("prompt_tokens", 0) or 0) for c in calls)
    completion = sum(int(c.usage.get("completion_tokens", 0) or 0) for c in calls)
    return prompt, completion
