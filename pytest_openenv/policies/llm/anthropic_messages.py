"""``--openenv-policy=anthropic``: the Messages API with tools through the ``anthropic`` SDK.

Transcripts stay in OpenAI chat format (the dataset is uniform across
providers): each turn converts the OpenAI-format history to Messages blocks, and
the response blocks back to an OpenAI-format assistant turn. Worker side; the
SDK is imported on the first model call.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from ..base import Reply, ToolCall, Turn, Usage, content_text, readable_count
from .common import RemoteModelPolicy, checked_remote_policy

if TYPE_CHECKING:
    from ...config.settings import Settings
    from ...util.overload import OverloadSignal

#: Messages rejects an assistant turn with no content; ours may be empty (the model said nothing).
EMPTY_TURN = "(no reply)"


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's JSON text as a Messages ``input`` object (always an object there)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_raw_arguments": arguments}


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI chat history -> (system text, Messages turns with content blocks).

    Tool results go back as ``tool_result`` blocks in a user turn; consecutive
    turns of one role are merged, as the API wants roles to alternate.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def push(role: str, blocks: list[dict[str, Any]]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    for message in messages:
        role = message.get("role")
        text = content_text(message.get("content"))
        if role == "system":
            if text:
                system.append(text)
        elif role == "user":
            push("user", [{"type": "text", "text": text or EMPTY_TURN}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id", ""),
                        "name": function.get("name", ""),
                        "input": tool_input(str(function.get("arguments", ""))),
                    }
                )
            push("assistant", blocks or [{"type": "text", "text": EMPTY_TURN}])
        elif role == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id", ""),
                "content": text or EMPTY_TURN,
            }
            if text.startswith("Error:"):
                result["is_error"] = True
            push("user", [result])
    return "\n\n".join(system), turns


def to_anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    converted = []
    for tool in tools:
        function = tool.get("function", tool)
        converted.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
            }
        )
    return converted


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def from_anthropic(content: list[Any], usage: Any) -> Reply:
    """Messages response blocks -> one OpenAI-format assistant ``Reply``."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content or []:
        kind = _field(block, "type")
        if kind == "text":
            texts.append(str(_field(block, "text") or ""))
        elif kind == "tool_use":
            raw = _field(block, "input")
            arguments = json.dumps(raw if raw is not None else {}, ensure_ascii=False)
            calls.append(
                ToolCall(
                    id=str(_field(block, "id") or f"toolu_{len(calls)}"),
                    name=str(_field(block, "name") or ""),
                    arguments=arguments,
                )
            )
    return Reply(content="".join(texts), tool_calls=tuple(calls), usage=anthropic_usage(usage))


def anthropic_usage(usage: Any) -> Usage:
    """Input tokens (cache writes and reads included) and output tokens; unknown where
    ``input_tokens`` / ``output_tokens`` are missing or a cache count is unreadable."""
    if usage is None:
        return Usage.missing()
    reported = Usage.reported(_field(usage, "input_tokens"), _field(usage, "output_tokens"))
    prompt, unknown = reported.prompt_tokens, reported.unknown
    for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        value = _field(usage, name)
        if value is None:  # optional: absent when no prompt caching took place
            continue
        count = readable_count(value)
        if count is None:
            return Usage.missing()
        prompt += count
    return Usage(prompt, reported.completion_tokens, unknown)


def is_message(response: Any) -> bool:
    """Whether a 200's body has the shape of a Messages response (no blocks included)."""
    return (
        isinstance(response, dict)
        and isinstance(response.get("content"), list)
        and all(isinstance(block, dict) for block in response["content"])
    )


def _accepts(method: Any, name: str) -> bool:
    """Whether an SDK method takes ``name``: recent SDKs dropped sampling parameters."""
    import inspect

    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return True


class AnthropicPolicy(RemoteModelPolicy):
    name: ClassVar[str] = "anthropic"
    provider: ClassVar[str] = "anthropic"
    key_env: ClassVar[str] = "ANTHROPIC_API_KEY"
    extra: ClassVar[str] = "anthropic"
    sdk: ClassVar[str] = "anthropic"
    #: set with the client; SDKs whose Messages API has no ``temperature`` get none
    _takes_temperature: bool = True

    def _make_client(self, module: Any, api_key: str) -> Any:
        from .deadline import model_event_hooks

        # the SDK's own client, plus a look at every answer: a 429 it retries still counts
        # for --openenv-concurrency auto, and a trickled answer is bounded (deadline.py)
        http = module.DefaultHttpxClient(
            event_hooks=model_event_hooks(self.count_attempt, self.overload)
        )
        client = module.Anthropic(api_key=api_key, http_client=http, **self.config.client_options())
        self._takes_temperature = _accepts(client.messages.create, "temperature")
        return client

    def _complete(self, client: Any, turn: Turn, timeout: float | None) -> Reply:
        system, messages = to_anthropic(turn.messages)
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "max_tokens": self.config.max_tokens,
        }
        if self._takes_temperature:
            body["temperature"] = self.config.temperature
        if system:
            body["system"] = system
        if turn.tools:
            body["tools"] = to_anthropic_tools(turn.tools)
        # the SDK's raw request, as in the OpenAI policy: same auth, retries and errors
        options = {"timeout": timeout} if timeout is not None else {}
        response = client.post("/v1/messages", body=body, cast_to=object, options=options)
        if not is_message(response):
            raise self.unreadable(response, "a Messages response")
        return from_anthropic(_field(response, "content"), _field(response, "usage"))


def build_anthropic_policy(
    settings: Settings, overload: OverloadSignal | None = None
) -> RemoteModelPolicy:
    """``--openenv-policy=anthropic``: model, SDK and key checked before any episode."""
    return checked_remote_policy(
        AnthropicPolicy, settings, overload, example_model="claude-sonnet-4-5"
    )
