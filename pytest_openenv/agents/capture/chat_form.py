"""OpenAI Chat Completions: the proxy's own form, what agents speaking it send and get.

A request in chat form is the canonical request every dialect is translated to; an
upstream answer is read into a ``ChatAnswer``, and rendered back as a completion or as the
``chat.completion.chunk`` stream the official API sends.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

from .records import ChatAnswer
from .sse import event

#: fields of an agent's chat request the proxy sets itself or must not forward
NOT_FORWARDED = ("model", "stream", "stream_options")


def text_of(content: Any) -> str:
    """The text of a message content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text")
        )
    return ""


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


def request_from_chat(body: dict[str, Any]) -> dict[str, Any]:
    """An agent's chat request as the canonical request (everything but what the proxy sets)."""
    return {key: value for key, value in body.items() if key not in NOT_FORWARDED}


def _tool_call(raw: Any, index: int) -> dict[str, Any]:
    raw = raw if isinstance(raw, dict) else {}
    function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
    arguments = function.get("arguments", "")
    if not isinstance(arguments, str):  # some servers send the object itself
        arguments = json.dumps(arguments)
    return {
        "id": str(raw.get("id") or f"call_{index}_{secrets.token_hex(6)}"),
        "type": "function",
        "function": {"name": str(function.get("name", "")), "arguments": arguments},
    }


def assistant_message(content: str | None, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message


def chat_usage(prompt: Any, completion: Any) -> dict[str, int]:
    def count(value: Any) -> int:
        return value if isinstance(value, int) and value >= 0 else 0

    return {
        "prompt_tokens": count(prompt),
        "completion_tokens": count(completion),
        "total_tokens": count(prompt) + count(completion),
    }


def answer_from_chat(payload: Any, model: str) -> ChatAnswer:
    """An upstream chat completion as a ``ChatAnswer``; ValueError when it is none."""
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("the upstream answer has no choices[0]: not a chat completion")
    choice = choices[0]
    raw = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content = raw.get("content")
    calls = raw.get("tool_calls") or []
    tool_calls = [_tool_call(c, i) for i, c in enumerate(calls if isinstance(calls, list) else [])]
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    finish = choice.get("finish_reason") or ("tool_calls" if tool_calls else "stop")
    return ChatAnswer(
        message=assistant_message(text_of(content) if content is not None else None, tool_calls),
        finish_reason=str(finish),
        usage=chat_usage(usage.get("prompt_tokens"), usage.get("completion_tokens")),
        id=str(payload.get("id") or new_id("chatcmpl-")),
        model=str(payload.get("model") or model),
    )


def chat_completion(answer: ChatAnswer) -> dict[str, Any]:
    return {
        "id": answer.id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": answer.model,
        "choices": [
            {
                "index": 0,
                "message": answer.message,
                "logprobs": None,
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": answer.usage,
    }


def chat_stream(answer: ChatAnswer, request: dict[str, Any]) -> Iterator[bytes]:
    """The answer as the API streams it: role, content, each tool call's name then its
    arguments, the finish reason, the usage chunk when asked for, ``[DONE]``."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return event(
            {
                "id": answer.id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": answer.model,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
        )

    yield chunk({"role": "assistant", "content": ""})
    content = answer.message.get("content")
    if content:
        yield chunk({"content": content})
    for index, call in enumerate(answer.message.get("tool_calls") or []):
        function = call["function"]
        head = {"name": function["name"], "arguments": ""}
        yield chunk(
            {
                "tool_calls": [
                    {"index": index, "id": call["id"], "type": "function", "function": head}
                ]
            }
        )
        if function["arguments"]:
            yield chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]}
            )
    yield chunk({}, answer.finish_reason)
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        yield event(
            {
                "id": answer.id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": answer.model,
                "choices": [],
                "usage": answer.usage,
            }
        )
    yield event("[DONE]")


def chat_error(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "invalid_api_key",
        404: "not_found",
        429: "rate_limit_exceeded",
    }.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}
