"""The dialects agents speak to the proxy, each a request reader and answer writers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .anthropic_form import (
    anthropic_error,
    anthropic_message,
    anthropic_stream,
    request_from_anthropic,
)
from .chat_form import chat_completion, chat_error, chat_stream, request_from_chat
from .records import ChatAnswer
from .responses_form import (
    request_from_responses,
    responses_error,
    responses_object,
    responses_stream,
)


@dataclass(frozen=True)
class Dialect:
    name: str
    #: the path the agent posts to, after its base URL's ``/v1`` (which is optional)
    path: str
    #: the agent's request in chat form (messages, tools, sampling; no model, no stream)
    to_chat: Callable[[dict[str, Any]], dict[str, Any]]
    #: the answer as the agent's non-streaming response body
    answer: Callable[[ChatAnswer, dict[str, Any]], dict[str, Any]]
    #: the answer as the agent's stream of server-sent events
    stream: Callable[[ChatAnswer, dict[str, Any]], Iterator[bytes]]
    #: an error body the agent's SDK reads (status, message)
    error: Callable[[int, str], dict[str, Any]]


CHAT = Dialect(
    "chat",
    "/chat/completions",
    request_from_chat,
    lambda answer, _request: chat_completion(answer),
    chat_stream,
    chat_error,
)
RESPONSES = Dialect(
    "responses",
    "/responses",
    request_from_responses,
    responses_object,
    responses_stream,
    responses_error,
)
ANTHROPIC = Dialect(
    "anthropic",
    "/messages",
    request_from_anthropic,
    lambda answer, _request: anthropic_message(answer),
    anthropic_stream,
    anthropic_error,
)
DIALECTS = (CHAT, RESPONSES, ANTHROPIC)


def dialect_of(path: str) -> Dialect | None:
    """The dialect a POST path speaks (``/v1/chat/completions`` or ``/chat/completions``)."""
    for dialect in DIALECTS:
        if path == dialect.path or path == f"/v1{dialect.path}":
            return dialect
    return None


def dialect_for_errors(path: str, headers: Any) -> Dialect:
    """Whose error body to answer with when the request is refused before it is read."""
    found = dialect_of(path)
    if found is not None:
        return found
    if path.startswith("/v1/messages") or headers.get("anthropic-version"):
        return ANTHROPIC
    return CHAT
