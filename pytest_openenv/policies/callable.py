"""User functions as policies: ``--openenv-policy=pkg.module:callable`` and the fixture.

The function receives the conversation so far (OpenAI chat format) and the
tools (OpenAI function-tool format) and returns the assistant's turn::

    def policy(messages, tools):                   # optionally a third parameter `turn`
        return {"name": "play_move", "arguments": {"action_id": 4}}

It may return a tool call (``{"name", "arguments"}`` with arguments as a dict
or JSON text, an OpenAI ``tool_calls`` entry, a ``ToolCall``), a list of them,
an assistant message dict (``{"content", "tool_calls"}``), a plain string (text
without a tool call: costs a turn and a reminder), ``None`` (same), or a
``Reply``. Worker side; called from episode threads with ``--openenv-concurrency``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from ..proposals import ProposedCall
from .base import Policy, Reply, ToolCall, Turn

ACCEPTED = (
    "a tool call {'name': ..., 'arguments': {...} or JSON text}, an OpenAI tool_calls entry, "
    "a ToolCall, a list of those, an assistant message {'content', 'tool_calls'}, a str, "
    "None, or a Reply"
)


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return "{}"
    if isinstance(arguments, str):
        return arguments  # kept raw: malformed JSON becomes a tool error the agent sees
    return json.dumps(arguments, ensure_ascii=False)


def _tool_call(value: Any, fallback_id: str, where: str) -> ToolCall:
    if isinstance(value, ToolCall):
        return value
    if isinstance(value, ProposedCall):
        return ToolCall(id=fallback_id, name=value.name, arguments=value.arguments_json())
    if isinstance(value, dict):
        function = value.get("function")
        source = function if isinstance(function, dict) else value
        name = source.get("name")
        if isinstance(name, str) and name:
            return ToolCall(
                id=str(value.get("id") or fallback_id),
                name=name,
                arguments=_arguments_text(source.get("arguments")),
            )
    raise TypeError(
        f"{where} returned {value!r} where a tool call was expected; accepted: {ACCEPTED}"
    )


def to_reply(value: Any, turn: int, where: str = "the policy") -> Reply:
    """Whatever a user policy returned, as one assistant ``Reply``."""

    def call_id(i: int) -> str:
        return f"call_{turn:03d}_{i}"

    if isinstance(value, Reply):
        return value
    if value is None:
        return Reply()
    if isinstance(value, str):
        return Reply(content=value)
    if isinstance(value, (list, tuple)):
        return Reply(
            tool_calls=tuple(_tool_call(v, call_id(i), where) for i, v in enumerate(value))
        )
    is_message = isinstance(value, dict) and ("tool_calls" in value or "content" in value)
    if is_message and not ("name" in value or "function" in value):
        calls = value.get("tool_calls") or []
        if not isinstance(calls, (list, tuple)):
            raise TypeError(f"{where} returned tool_calls={calls!r}; accepted: {ACCEPTED}")
        content = value.get("content")
        return Reply(
            content=content if isinstance(content, str) else "",
            tool_calls=tuple(_tool_call(v, call_id(i), where) for i, v in enumerate(calls)),
        )
    return Reply(tool_calls=(_tool_call(value, call_id(0), where),))


def _wants_turn(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature
        return False
    return any(p.name == "turn" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class CallablePolicy(Policy):
    """Wraps ``fn(messages, tools[, turn=])`` as a ``Policy``."""

    name: ClassVar[str] = "callable"

    def __init__(self, fn: Callable[..., Any], label: str | None = None) -> None:
        self.fn = fn
        self.label = label or _label(fn)
        # the record's `policy` says which function played (e.g. "mypkg.agents:greedy")
        self.name = self.label  # type: ignore[misc]
        self.model = getattr(fn, "model", None)
        self._pass_turn = _wants_turn(fn)
        # a function that takes the turn may read turn.legal: have the runner fill it in
        self.wants_legal = self._pass_turn  # type: ignore[misc]

    def act(self, turn: Turn) -> Reply:
        messages = [dict(m) for m in turn.messages]
        tools = [dict(t) for t in turn.tools]
        extra = {"turn": turn} if self._pass_turn else {}
        value = self.fn(messages, tools, **extra)
        return to_reply(value, turn.turn, where=self.label)

    def close(self) -> None:
        close = getattr(self.fn, "close", None)
        if callable(close) and not isinstance(self.fn, type):
            close()


def _label(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or type(fn).__module__
    qualname = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{qualname}"


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # `pytest` (unlike `python -m pytest`) does not put the current folder on sys.path
        if exc.name != module_name.split(".")[0] or os.getcwd() in sys.path:
            raise
        sys.path.insert(0, os.getcwd())
        return importlib.import_module(module_name)


def load_policy(spec: str) -> Policy:
    """``pkg.module:attr`` -> a Policy: a Policy instance or subclass, or any callable."""
    module_name, _, attr = spec.partition(":")
    flag = f"--openenv-policy={spec!r}"
    if not module_name or not attr:
        raise pytest.UsageError(
            f"{flag} is not pkg.module:callable; e.g. --openenv-policy=mypkg.agents:greedy"
        )
    try:
        target: Any = _import(module_name)
    except Exception as exc:
        raise pytest.UsageError(
            f"{flag}: cannot import module {module_name!r} ({type(exc).__name__}: {exc})"
        ) from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise pytest.UsageError(f"{flag}: {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if isinstance(target, type) and issubclass(target, Policy):
        return target()
    if isinstance(target, Policy):
        return target
    if not callable(target):
        raise pytest.UsageError(
            f"{flag}: {attr!r} is a {type(target).__name__}, not a callable or Policy; expected "
            "def policy(messages, tools) -> tool call"
        )
    return CallablePolicy(target, label=spec)
