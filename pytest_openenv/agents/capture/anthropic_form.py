"""Anthropic Messages <-> the chat form, both ways.

Agent side: a Messages request (Claude Code's) becomes a chat-form request, and the answer
goes back as a Message or as the Messages stream (``message_start``, content blocks with
their deltas, ``message_delta``, ``message_stop``). Upstream side: a chat-form request
becomes a Messages request for api.anthropic.com, and its Message a ``ChatAnswer``.

What has no counterpart is dropped on the way: thinking blocks, ``cache_control``, server
tools (those with no ``input_schema``), a tool result's ``is_error`` flag.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .chat_form import assistant_message, chat_usage, new_id, text_of
from .records import ChatAnswer
from .sse import event

ANTHROPIC_VERSION = "2023-06-01"
#: Messages requires ``max_tokens``; a chat request may leave it out
DEFAULT_MAX_TOKENS = 4096

STOP_TO_CHAT = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}
FINISH_TO_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


# -- agent side: Messages request -> chat form -------------------------------------------
def _image_part(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text parts as one string (what chat templates read); with an image, the parts."""
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return parts


def _tool_result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n\n".join(text_of([b]) for b in content if isinstance(b, dict) and text_of([b]))
    return text_of(content) if content is not None else ""


def _user_messages(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return [{"role": "user", "content": text_of(content)}]
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "tool_result":
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": str(block.get("tool_use_id", "")),
                    "content": _tool_result_text(block.get("content")),
                }
            )
        elif kind == "text" and block.get("text"):
            parts.append({"type": "text", "text": str(block["text"])})
        elif kind == "image":
            parts.append(_image_part(block))
    # tool results answer the previous assistant turn: in chat form they come first
    return results + ([{"role": "user", "content": _content(parts)}] if parts else [])


def _assistant_message(content: Any) -> dict[str, Any]:
    if not isinstance(content, list):
        return assistant_message(text_of(content), [])
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and block.get("text"):
            texts.append(str(block["text"]))
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": str(block.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": str(block.get("name", "")),
                        "arguments": json.dumps(block.get("input") or {}),
                    },
                }
            )
    return assistant_message("\n\n".join(texts), calls)


def system_text(system: Any) -> str:
    if isinstance(system, list):
        return "\n\n".join(text_of([b]) for b in system if isinstance(b, dict) and text_of([b]))
    return text_of(system) if system is not None else ""


def chat_tools_from_anthropic(tools: Any) -> list[dict[str, Any]]:
    out = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("input_schema"), dict):
            function = {"name": str(tool.get("name", "")), "parameters": tool["input_schema"]}
            if tool.get("description"):
                function["description"] = str(tool["description"])
            out.append({"type": "function", "function": function})
    return out


def _chat_tool_choice(choice: Any) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": str(choice.get("name", ""))}}
    return {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))


def request_from_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages request in chat form (the proxy sets the model and never streams)."""
    messages: list[dict[str, Any]] = []
    system = system_text(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            messages.append(_assistant_message(message.get("content")))
        else:
            messages.extend(_user_messages(message.get("content")))
    request: dict[str, Any] = {"messages": messages}
    tools = chat_tools_from_anthropic(body.get("tools"))
    if tools:
        request["tools"] = tools
        choice = _chat_tool_choice(body.get("tool_choice"))
        if choice is not None:
            request["tool_choice"] = choice
        tool_choice = body.get("tool_choice")
        if isinstance(tool_choice, dict) and tool_choice.get("disable_parallel_tool_use"):
            request["parallel_tool_calls"] = False
    for name in ("max_tokens", "temperature", "top_p"):
        if body.get(name) is not None:
            request[name] = body[name]
    if body.get("stop_sequences"):
        request["stop"] = body["stop_sequences"]
    return request


# -- agent side: ChatAnswer -> Message, stream ---------------------------------------------
def _tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the object Messages carries; {} when they are no object
    (the record keeps the model's own text)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _blocks(answer: ChatAnswer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.message.get("content"):
        blocks.append({"type": "text", "text": answer.message["content"]})
    for call in answer.message.get("tool_calls") or []:
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": call["function"]["name"],
                "input": _tool_input(call["function"]["arguments"]),
            }
        )
    return blocks


def _stop_reason(answer: ChatAnswer) -> str:
    if answer.message.get("tool_calls"):
        return "tool_use"
    return FINISH_TO_STOP.get(answer.finish_reason, "end_turn")


def _usage(answer: ChatAnswer, output: int | None = None) -> dict[str, int]:
    return {
        "input_tokens": answer.usage["prompt_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": answer.usage["completion_tokens"] if output is None else output,
    }


def _message_id(answer: ChatAnswer) -> str:
    return answer.id if answer.id.startswith("msg_") else new_id("msg_")


def anthropic_message(answer: ChatAnswer) -> dict[str, Any]:
    return {
        "id": _message_id(answer),
        "type": "message",
        "role": "assistant",
        "model": answer.model,
        "content": _blocks(answer),
        "stop_reason": _stop_reason(answer),
        "stop_sequence": None,
        "usage": _usage(answer),
    }


def anthropic_stream(answer: ChatAnswer, request: dict[str, Any]) -> Iterator[bytes]:
    start = {**anthropic_message(answer), "content": [], "stop_reason": None}
    start["usage"] = _usage(answer, output=0)
    yield event({"type": "message_start", "message": start}, "message_start")
    yield event({"type": "ping"}, "ping")
    for index, block in enumerate(_blocks(answer)):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield event(
            {"type": "content_block_start", "index": index, "content_block": opened},
            "content_block_start",
        )
        yield event(
            {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
        )
        yield event({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(answer), "stop_sequence": None},
            "usage": {"output_tokens": answer.usage["completion_tokens"]},
        },
        "message_delta",
    )
    yield event({"type": "message_stop"}, "message_stop")


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- upstream side: chat form -> Messages request, Message -> ChatAnswer --------------------
def _anthropic_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") in ("text", "input_text", "output_text") and part.get("text"):
            blocks.append({"type": "text", "text": str(part["text"])})
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            if url.startswith("data:") and ";base64," in url:
                media, _, data = url[5:].partition(";base64,")
                source = {"type": "base64", "media_type": media, "data": data}
            else:
                source = {"type": "url", "url": url}
            blocks.append({"type": "image", "source": source})
    return blocks


def _anthropic_tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name", "")
        out: dict[str, Any] = {"type": "tool", "name": str(name)}
    elif choice in ("auto", "required", "none"):
        out = {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}
    elif parallel is False:
        out = {"type": "auto"}
    else:
        return None
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def anthropic_request(body: dict[str, Any]) -> dict[str, Any]:
    """A chat-form request as a Messages request (consecutive turns of one role merged,
    tool results in the user turn that follows the calls)."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in body.get("messages") or []:
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(text_of(message.get("content")))
        elif role == "assistant":
            blocks = _anthropic_parts(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": str(call.get("id", "")),
                        "name": str(function.get("name", "")),
                        "input": _tool_input(str(function.get("arguments") or "")),
                    }
                )
            push("assistant", blocks)
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id", "")),
                "content": text_of(message.get("content")),
            }
            push("user", [result])
        else:
            push("user", _anthropic_parts(message.get("content")))
    out: dict[str, Any] = {
        "model": body["model"],
        "messages": turns,
        "max_tokens": body.get("max_tokens")
        or body.get("max_completion_tokens")
        or DEFAULT_MAX_TOKENS,
    }
    if any(system):
        out["system"] = "\n\n".join(s for s in system if s)
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict):
            entry = {
                "name": str(function.get("name", "")),
                "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
            }
            if function.get("description"):
                entry["description"] = str(function["description"])
            tools.append(entry)
    if tools:
        out["tools"] = tools
        choice = _anthropic_tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None:
            out["tool_choice"] = choice
    for name in ("temperature", "top_p", "top_k"):
        if body.get(name) is not None:
            out[name] = body[name]
    stop = body.get("stop")
    if stop:
        out["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    return out


def answer_from_anthropic(payload: Any, model: str) -> ChatAnswer:
    """An upstream Message as a ``ChatAnswer``; ValueError when it is none."""
    if not isinstance(payload, dict) or not isinstance(payload.get("content"), list):
        raise ValueError("the upstream answer has no content list: not a Message")
    message = _assistant_message(payload["content"])
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    prompt = usage.get("input_tokens")
    if isinstance(prompt, int):
        for cached in ("cache_read_input_tokens", "cache_creation_input_tokens"):
            if isinstance(usage.get(cached), int):
                prompt += usage[cached]
    finish = STOP_TO_CHAT.get(str(payload.get("stop_reason")), "stop")
    return ChatAnswer(
        message=message,
        finish_reason="tool_calls" if message.get("tool_calls") else finish,
        usage=chat_usage(prompt, usage.get("output_tokens")),
        id=str(payload.get("id") or new_id("msg_")),
        model=str(payload.get("model") or model),
    )


def count_tokens(body: dict[str, Any]) -> dict[str, int]:
    """``/v1/messages/count_tokens``, estimated (about four characters a token): agents
    ask it to plan their context, and no OpenAI-compatible upstream answers it."""
    return {"input_tokens": max(1, len(json.dumps(body, separators=(",", ":"))) // 4)}
