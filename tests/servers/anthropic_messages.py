"""An Anthropic Messages API server on 127.0.0.1 (``POST /v1/messages``), for tests.

The same deterministic model and faults as ``openai_compat`` (see ``fake_model``),
in the Messages wire format: ``system`` apart, content blocks, ``tool_use`` /
``tool_result``. ``server.base_url`` is what the ``anthropic`` SDK takes as
``base_url`` (it appends ``/v1/messages``)::

    with serve_anthropic() as server:
        run(f"--openenv-llm-endpoint={server.base_url}", "--openenv-policy=anthropic", ...)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

try:
    from .fake_model import Decision, Faults, ModelServer, call_id
except ImportError:  # run as a script
    from fake_model import Decision, Faults, ModelServer, call_id  # type: ignore[no-redef]

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "".join(_block_text(b) for b in content)
        return str(content or "")
    return ""


class AnthropicMessagesServer(ModelServer):
    paths = ("/v1/messages",)

    def texts_and_turn(self, body: dict[str, Any]) -> tuple[list[str], int]:
        texts = [body["system"]] if isinstance(body.get("system"), str) else []
        messages = body.get("messages") or []
        for message in messages:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [content]
            texts.append("".join(_block_text(b) for b in blocks))
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return texts, turn

    def completion(self, body: dict[str, Any], decision: Decision, usage: tuple[int, int]) -> Any:
        messages = body.get("messages") or []
        content: list[dict[str, Any]] = []
        if decision.text:
            content.append({"type": "text", "text": decision.text})
        for i, (name, arguments) in enumerate(decision.calls):
            try:
                tool_input: Any = json.loads(arguments)
            except ValueError:
                tool_input = arguments  # a malformed call: input that is not an object
            content.append(
                {
                    "type": "tool_use",
                    "id": call_id("toolu_", messages, i),
                    "name": name,
                    "input": tool_input,
                }
            )
        return {
            "id": call_id("msg_", messages, 0),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": "tool_use" if decision.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }

    def model_entry(self, model: str) -> dict[str, Any]:
        # the Models API's object (GET /v1/models/{id})
        return {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "2025-01-01T00:00:00Z",
        }

    def model_list(self, models: list[str]) -> dict[str, Any]:
        data = [self.model_entry(m) for m in models]
        return {"data": data, "has_more": False, "first_id": None, "last_id": None}

    def error_body(self, status: int, message: str) -> Any:
        kind = ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}


@contextlib.contextmanager
def serve_anthropic(
    faults: Faults | None = None, **kwargs: Any
) -> Iterator[AnthropicMessagesServer]:
    server = AnthropicMessagesServer(faults, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()
