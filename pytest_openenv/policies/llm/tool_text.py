"""Tool calls in the text a local model generated, in the formats chat templates teach.

A server (vLLM, llama.cpp) parses tool calls before it answers; a checkpoint run in-process
leaves that to us. ``parse_tool_calls`` reads, in this order:

- Hermes / Qwen: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per
  call (an unclosed last block counts: generation may stop before the closing tag);
- Llama 3.1: ``<|python_tag|>`` followed by ``{"name": ..., "parameters": {...}}`` calls
  separated by ``;``, and the same JSON without the tag;
- Mistral: ``[TOOL_CALLS]`` followed by a JSON list of calls;
- plain JSON: a ```` ```json ```` fence or a bare object (or list of objects) anywhere in the
  text, holding ``name`` and ``arguments`` / ``parameters``, or OpenAI's
  ``{"function": {"name", "arguments"}}`` shape.

A tagged block whose JSON does not parse is still a call (its name read where it can be), so
the env answers with a tool error the model sees, as it would for a hosted model's malformed
arguments; untagged text that is not a call object is just text, a turn without a tool call.
Arguments given as an object become JSON text; given as JSON text they are kept as sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

HERMES_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
JSON_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
NAME_IN_TEXT = re.compile(r'"name"\s*:\s*"([^"\\]*)"')
PYTHON_TAG = "<|python_tag|>"
MISTRAL_TAG = "[TOOL_CALLS]"
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class TextCall:
    """One call found in generated text: ``arguments`` is JSON text (or the raw block)."""

    name: str
    arguments: str


@dataclass(frozen=True)
class ParsedText:
    calls: tuple[TextCall, ...]
    #: the text around the calls, stripped
    content: str


def parse_tool_calls(text: str) -> ParsedText:
    """The tool calls in ``text`` and what is left of it."""
    if "<tool_call>" in text:
        return _hermes(text)
    if PYTHON_TAG in text:
        before, _, after = text.partition(PYTHON_TAG)
        calls, rest = _json_calls(after, separators=";")
        return ParsedText(calls, _join(before, rest))
    if MISTRAL_TAG in text:
        before, _, after = text.partition(MISTRAL_TAG)
        calls, rest = _json_calls(after, separators=",")
        return ParsedText(calls, _join(before, rest))
    fences = list(JSON_FENCE.finditer(text))
    for fence in fences:
        calls, rest = _json_calls(fence.group(1), separators=";,")
        if calls and not rest:
            return ParsedText(calls, _join(text[: fence.start()], text[fence.end() :]))
    return _bare_json(text)


def _hermes(text: str) -> ParsedText:
    calls = []
    for block in HERMES_BLOCK.finditer(text):
        inner = block.group(1).strip()
        found, rest = _json_calls(inner, separators="")
        if found and not rest:
            calls.extend(found)
        else:
            # what the model meant as a call, unreadable: the env says so (unknown tool or
            # arguments that are not JSON), and it counts as a call, not as silence
            name = NAME_IN_TEXT.search(inner)
            calls.append(TextCall(name.group(1) if name else "", inner))
    return ParsedText(tuple(calls), HERMES_BLOCK.sub("", text).strip())


def _bare_json(text: str) -> ParsedText:
    """Call objects written as plain JSON somewhere in the text."""
    calls: list[TextCall] = []
    kept: list[str] = []
    position = 0
    while True:
        start = _next_json_start(text, position)
        if start < 0:
            break
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            kept.append(text[position : start + 1])
            position = start + 1
            continue
        found = _calls_in(value)
        if found:
            kept.append(text[position:start])
            calls.extend(found)
        else:
            kept.append(text[position:end])
        position = end
    kept.append(text[position:])
    return ParsedText(tuple(calls), "".join(kept).strip() if calls else text.strip())


def _next_json_start(text: str, position: int) -> int:
    starts = [i for i in (text.find("{", position), text.find("[", position)) if i >= 0]
    return min(starts) if starts else -1


def _json_calls(text: str, *, separators: str) -> tuple[tuple[TextCall, ...], str]:
    """Consecutive JSON call values at the start of ``text`` and the text after them."""
    calls: list[TextCall] = []
    position = 0
    text = text.strip()
    while position < len(text):
        while position < len(text) and (text[position].isspace() or text[position] in separators):
            position += 1
        if position >= len(text):
            break
        try:
            value, end = _DECODER.raw_decode(text, position)
        except ValueError:
            break
        found = _calls_in(value)
        if not found:
            break
        calls.extend(found)
        position = end
    return tuple(calls), text[position:].strip() if calls else text


def _calls_in(value: Any) -> list[TextCall]:
    if isinstance(value, list):
        found = [_call_of(item) for item in value]
        return [call for call in found if call is not None] if all(found) else []
    call = _call_of(value)
    return [call] if call is not None else []


def _call_of(value: Any) -> TextCall | None:
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict) and isinstance(function.get("name"), str):
        value = function
    name = value.get("name")
    if not isinstance(name, str):
        return None
    for key in ("arguments", "parameters"):
        if key in value:
            arguments = value[key]
            break
    else:
        return None
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return TextCall(name, arguments)


def _join(*parts: str) -> str:
    return "\n".join(part.strip() for part in parts if part.strip())
