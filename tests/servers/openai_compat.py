"""An OpenAI-compatible chat-completions server on 127.0.0.1 (``POST /v1/chat/completions``).

For tests and benchmarks (import with ``tests/`` on ``sys.path``)::

    from servers.openai_compat import serve_openai

    with serve_openai(delay=0.05) as server:      # a fixed 50 ms per completion
        run(f"--openenv-llm-endpoint={server.base_url}", ...)
        print(server.requests, server.max_in_flight)

``server.base_url`` ends in ``/v1`` like vLLM's; faults as in ``fake_model.Faults``.
Run it by hand with ``python tests/servers/openai_compat.py --delay 0.05``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

try:
    from .fake_model import Decision, Faults, ModelServer, call_id, serve_by_hand
except ImportError:  # run as a script
    from fake_model import (  # type: ignore[no-redef]
        Decision,
        Faults,
        ModelServer,
        call_id,
        serve_by_hand,
    )

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    429: "rate_limit_exceeded",
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class OpenAICompatServer(ModelServer):
    paths = ("/chat/completions",)

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def texts_and_turn(self, body: dict[str, Any]) -> tuple[list[str], int]:
        messages = body.get("messages") or []
        texts = [_text(m.get("content")) for m in messages]
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return texts, turn

    def completion(self, body: dict[str, Any], decision: Decision, usage: tuple[int, int]) -> Any:
        messages = body.get("messages") or []
        message: dict[str, Any] = {"role": "assistant", "content": decision.text or None}
        if decision.calls:
            message["tool_calls"] = [
                {
                    "id": call_id("call_", messages, i),
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
                for i, (name, arguments) in enumerate(decision.calls)
            ]
        return {
            "id": call_id("chatcmpl-", messages, 0),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if decision.calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1],
            },
        }

    def error_body(self, status: int, message: str) -> Any:
        kind = ERROR_TYPES.get(status, "server_error")
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


@contextlib.contextmanager
def serve_openai(faults: Faults | None = None, **kwargs: Any) -> Iterator[OpenAICompatServer]:
    """Start the server, yield it (``base_url``, ``requests`` ...), stop it."""
    server = OpenAICompatServer(faults, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    serve_by_hand(serve_openai, __doc__.splitlines()[0])
