"""OpenAI Responses (Codex's only dialect) -> the chat form, and answers back.

The request's ``instructions`` and ``input`` items become chat messages: message items by
role (``developer`` as ``system``), consecutive ``function_call`` items one assistant turn
with its tool calls, ``function_call_output`` items tool messages; reasoning items are
dropped. Function tools map one to one; a custom (free-form) tool becomes a function whose
one string argument ``input`` carries the text, and its calls go back as
``custom_tool_call`` items; a namespace's tools (Codex puts each MCP server's in one) become
functions named ``NAMESPACE__NAME``, and their calls go back with ``namespace`` and ``name``
apart. Hosted tools (web search) are dropped: no upstream model runs them. The proxy is
stateless: ``previous_response_id`` is refused. The answer goes back as a Response, or as
the Responses stream (``response.created``, each output item added, its deltas and done,
``response.completed``, or ``response.incomplete`` for an answer cut at its token limit).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...errors import StatefulRequest
from .chat_form import assistant_message, chat_error, new_id, text_of
from .records import ChatAnswer
from .sse import event

#: a custom tool's one argument, as the chat-form function sees it
CUSTOM_INPUT = "input"


def _message_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text") and part.get("text") is not None:
            parts.append({"type": "text", "text": str(part["text"])})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal", ""))})
        elif kind == "input_image" and part.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": str(part["image_url"])}})
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return text_of(output) if isinstance(output, list) else json.dumps(output)


def request_from_responses(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses request in chat form."""
    if body.get("previous_response_id"):
        raise StatefulRequest(
            "previous_response_id is not supported by the capture proxy: send the whole "
            "conversation in input (store=false)"
        )
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": text_of(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    table = tool_table(body)
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = str(item.get("role", "user"))
            content = _message_content(item.get("content"))
            if role == "assistant":
                messages.append(assistant_message(text_of(content) or None, []))
            else:
                messages.append(
                    {"role": "system" if role == "developer" else role, "content": content}
                )
        elif kind in ("function_call", "custom_tool_call"):
            name = flat_name(item.get("namespace") or None, str(item.get("name", "")))
            declared = table.get(name)
            if kind == "custom_tool_call" or (declared is not None and declared.kind == "custom"):
                arguments = json.dumps({CUSTOM_INPUT: str(item.get("input", ""))})
            else:
                arguments = str(item.get("arguments") or "")
            call = {
                "id": str(item.get("call_id", "")),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append(assistant_message(None, [call]))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "content": _output_text(item.get("output")),
                }
            )
    request: dict[str, Any] = {"messages": messages}
    tools = _chat_tools(body.get("tools"))
    if tools:
        request["tools"] = tools
        choice = body.get("tool_choice")
        if choice in ("auto", "required", "none"):
            request["tool_choice"] = choice
        elif isinstance(choice, dict) and choice.get("name"):
            request["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        if body.get("parallel_tool_calls") is False:
            request["parallel_tool_calls"] = False
    if body.get("max_output_tokens") is not None:
        request["max_tokens"] = body["max_output_tokens"]
    for name in ("temperature", "top_p"):
        if body.get(name) is not None:
            request[name] = body[name]
    return request


@dataclass(frozen=True)
class ToolName:
    """A tool as the Responses request names it: its namespace, its name, its kind."""

    namespace: str | None
    name: str
    #: ``function`` (JSON arguments) or ``custom`` (free-form text)
    kind: str


def flat_name(namespace: str | None, name: str) -> str:
    """A namespaced tool's one name in chat form (``mcp__openenv`` + ``play_move``:
    ``mcp__openenv__play_move``, the name Claude Code gives the same MCP tool)."""
    return f"{namespace}__{name}" if namespace else name


def _declared(tools: Any, namespace: str | None = None) -> Iterator[tuple[ToolName, dict]]:
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind == "namespace":
            yield from _declared(tool.get("tools"), str(tool.get("name", "")) or None)
        elif kind in ("function", "custom"):
            yield ToolName(namespace, str(tool.get("name", "")), str(kind)), tool
        # hosted tools (web search, file search ...): no upstream model runs them


def tool_table(body: dict[str, Any]) -> dict[str, ToolName]:
    """The request's function and custom tools (in namespaces too) by their chat-form name."""
    return {flat_name(t.namespace, t.name): t for t, _ in _declared(body.get("tools"))}


def _chat_tools(tools: Any) -> list[dict[str, Any]]:
    out = []
    for name, tool in _declared(tools):
        if name.kind == "function":
            parameters = tool.get("parameters") or {"type": "object", "properties": {}}
        else:
            parameters = {
                "type": "object",
                "properties": {CUSTOM_INPUT: {"type": "string"}},
                "required": [CUSTOM_INPUT],
            }
        function = {"name": flat_name(name.namespace, name.name), "parameters": parameters}
        if tool.get("description"):
            function["description"] = str(tool["description"])
        out.append({"type": "function", "function": function})
    return out


# -- the answer ------------------------------------------------------------------------
def _custom_input(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_INPUT), str):
        return value[CUSTOM_INPUT]
    return arguments


def _output_items(answer: ChatAnswer, request: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    content = answer.message.get("content")
    if content:
        items.append(
            {
                "type": "message",
                "id": new_id("msg_"),
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": content, "annotations": [], "logprobs": []}
                ],
            }
        )
    table = tool_table(request)
    for call in answer.message.get("tool_calls") or []:
        flat = call["function"]["name"]
        # a name the request did not declare goes back as the model said it
        declared = table.get(flat, ToolName(None, flat, "function"))
        if declared.kind == "custom":
            item = {
                "type": "custom_tool_call",
                "id": new_id("ctc_"),
                "call_id": call["id"],
                "name": declared.name,
                "input": _custom_input(call["function"]["arguments"]),
                "status": "completed",
            }
        else:
            item = {
                "type": "function_call",
                "id": new_id("fc_"),
                "call_id": call["id"],
                "name": declared.name,
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        if declared.namespace:
            item["namespace"] = declared.namespace
        items.append(item)
    return items


def _usage(answer: ChatAnswer) -> dict[str, Any]:
    return {
        "input_tokens": answer.usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": answer.usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": answer.usage["total_tokens"],
    }


def _response(
    answer: ChatAnswer, request: dict[str, Any], output: list[dict[str, Any]], status: str, rid: str
) -> dict[str, Any]:
    incomplete = status == "incomplete"
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": answer.model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": request.get("temperature"),
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "truncation": "disabled",
        "usage": _usage(answer) if status != "in_progress" else None,
        "user": None,
        "metadata": {},
    }


def _status(answer: ChatAnswer) -> str:
    return "incomplete" if answer.finish_reason == "length" else "completed"


def responses_object(answer: ChatAnswer, request: dict[str, Any]) -> dict[str, Any]:
    items = _output_items(answer, request)
    return _response(answer, request, items, _status(answer), new_id("resp_"))


def responses_stream(answer: ChatAnswer, request: dict[str, Any]) -> Iterator[bytes]:
    rid = new_id("resp_")
    sequence = iter(range(1 << 30))

    def emit(kind: str, **fields: Any) -> bytes:
        return event({"type": kind, "sequence_number": next(sequence), **fields}, kind)

    opening = _response(answer, request, [], "in_progress", rid)
    yield emit("response.created", response=opening)
    yield emit("response.in_progress", response=opening)
    items = _output_items(answer, request)
    for index, item in enumerate(items):
        where = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            empty_part = {**item["content"][0], "text": ""}
            yield emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            yield emit("response.content_part.added", **where, content_index=0, part=empty_part)
            yield emit(
                "response.output_text.delta", **where, content_index=0, delta=text, logprobs=[]
            )
            yield emit(
                "response.output_text.done", **where, content_index=0, text=text, logprobs=[]
            )
            yield emit(
                "response.content_part.done", **where, content_index=0, part=item["content"][0]
            )
        elif item["type"] == "function_call":
            yield emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            yield emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
            yield emit(
                "response.function_call_arguments.done", **where, arguments=item["arguments"]
            )
        else:
            yield emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "input": "", "status": "in_progress"},
            )
            yield emit("response.custom_tool_call_input.delta", **where, delta=item["input"])
            yield emit("response.custom_tool_call_input.done", **where, input=item["input"])
        yield emit("response.output_item.done", output_index=index, item=item)
    status = _status(answer)
    closing = _response(answer, request, items, status, rid)
    yield emit(
        "response.completed" if status == "completed" else "response.incomplete", response=closing
    )


def responses_error(status: int, message: str) -> dict[str, Any]:
    return chat_error(status, message)
