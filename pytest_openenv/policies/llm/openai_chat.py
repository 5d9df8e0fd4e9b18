"""``--openenv-policy=openai``: chat completions with tools, through the SDK or ``http.client``.

``OpenAIPolicy`` speaks through the official ``openai`` SDK (the official API, and
any endpoint with ``--openenv-llm-client=sdk``); ``OpenAIHTTPPolicy`` through the
standard library (``http_client.py``: any OpenAI-compatible server, vLLM, TGI,
Ollama, llama.cpp, HF Inference, through ``--openenv-llm-endpoint``), the same body
and the same answers read. Worker side; the SDK is imported on the first model
call, never at plugin import, and never by ``OpenAIHTTPPolicy``.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import EndpointStatus, EndpointTimeout, EndpointUnreachable
from ..base import Reply, ToolCall, Turn, Usage, content_text
from .common import Failure, RemoteModelPolicy, checked_remote_policy

if TYPE_CHECKING:
    from ...config.settings import Settings
    from ...util.overload import OverloadSignal

#: OpenAI reasoning models (o1, o3, o4-mini, gpt-5 ...) reject ``max_tokens`` and
#: ``temperature`` on the official API; they take ``max_completion_tokens``.
REASONING_MODELS = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)

#: Message fields the chat completions API accepts, by role; ours carry a few more.
WIRE_FIELDS = {
    "system": ("role", "content"),
    "user": ("role", "content"),
    "assistant": ("role", "content", "tool_calls"),
    "tool": ("role", "tool_call_id", "content"),
}


def is_reasoning_model(model: str, official: bool) -> bool:
    return official and bool(REASONING_MODELS.match(model))


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript as the API wants it: only the fields each role accepts."""
    wire = []
    for message in messages:
        fields = WIRE_FIELDS.get(message.get("role", ""), tuple(message))
        wire.append({k: message[k] for k in fields if k in message})
    return wire


def request_body(
    model: str,
    turn: Turn,
    *,
    temperature: float,
    max_tokens: int,
    official: bool,
) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments for one turn."""
    body: dict[str, Any] = {"model": model, "messages": wire_messages(turn.messages)}
    if turn.tools:
        body["tools"] = turn.tools
        # OpenAI's default with tools, said out loud: llama-cpp-python's tool-calling chat
        # formats read a missing tool_choice as "none" and hide the tools from the model.
        body["tool_choice"] = "auto"
    if is_reasoning_model(model, official):
        body["max_completion_tokens"] = max_tokens
    else:
        body["max_tokens"] = max_tokens
        body["temperature"] = temperature
    if not official:
        # Self-hosted servers (vLLM, llama.cpp, TGI) honour a sampling seed: with it an
        # episode samples the same way on every run, and each repeat differently.
        body["seed"] = sampling_seed(turn)
    return body


def sampling_seed(turn: Turn) -> int:
    """The episode's seed, moved along per repeat; in the 31 bits every server accepts."""
    return (turn.seed + 1_000_003 * turn.repeat) % (2**31 - 1)


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def parse_tool_call(raw: Any, fallback_id: str) -> ToolCall:
    """One tool call of a response; tolerant of what compatible servers send."""
    function = _field(raw, "function") or raw
    name = _field(function, "name") or _field(raw, "name") or ""
    arguments = _field(function, "arguments")
    if arguments is None:
        arguments = _field(raw, "input") or ""
    if not isinstance(arguments, str):
        # some compatible servers send an object instead of JSON text
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id=str(_field(raw, "id") or fallback_id), name=str(name), arguments=arguments)


def is_chat_completion(response: Any) -> bool:
    """Whether a 200's body has the shape of a chat completion (empty choices included).

    A completion with no tool call, empty content or content parts is still one: the
    model's turn, judged by the env. Anything else is not an answer at all.
    """
    if not isinstance(response, dict) or not isinstance(response.get("choices"), list):
        return False
    return all(
        isinstance(choice, dict) and isinstance(choice.get("message"), dict)
        for choice in response["choices"]
    )


def json_or_text(text: str) -> Any:
    """``text`` as JSON when it parses, else itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_response(response: Any, turn: Turn) -> Reply:
    """A chat completion as one assistant ``Reply``."""
    choices = _field(response, "choices") or []
    usage = _field(response, "usage")
    tokens = (
        Usage.reported(_field(usage, "prompt_tokens"), _field(usage, "completion_tokens"))
        if usage is not None
        else Usage.missing()
    )
    if not choices:
        return Reply(content="", usage=tokens)
    message = _field(choices[0], "message") or {}
    content = _field(message, "content")
    calls = _field(message, "tool_calls") or []
    return Reply(
        content=content_text(content),
        tool_calls=tuple(
            parse_tool_call(call, f"call_{turn.turn:03d}_{i}") for i, call in enumerate(calls)
        ),
        usage=tokens,
    )


class OpenAIPolicy(RemoteModelPolicy):
    name: ClassVar[str] = "openai"
    provider: ClassVar[str] = "openai"
    key_env: ClassVar[str] = "OPENAI_API_KEY"
    extra: ClassVar[str] = "openai"
    sdk: ClassVar[str] = "openai"

    def _make_client(self, module: Any, api_key: str) -> Any:
        from .deadline import model_event_hooks

        # the SDK's own client, plus a look at every answer: a 429 it retries still counts
        # for --openenv-concurrency auto, and a trickled answer is bounded (deadline.py)
        http = module.DefaultHttpxClient(
            event_hooks=model_event_hooks(self.count_attempt, self.overload)
        )
        return module.OpenAI(api_key=api_key, http_client=http, **self.config.client_options())

    def _body(self, turn: Turn) -> dict[str, Any]:
        """The chat-completions request for ``turn``: one body for the SDK and http paths."""
        return request_body(
            self.config.model,
            turn,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            official=self.config.base_url is None,
        )

    def _complete(self, client: Any, turn: Turn, timeout: float | None) -> Reply:
        body = self._body(turn)
        # The SDK's raw request (its documented route for custom bodies): same auth,
        # retries, Retry-After handling and error classes as chat.completions.create,
        # without re-walking the transcript against the typed parameters (~3 ms of CPU
        # per call, which under the GIL caps how many episodes one process keeps in flight).
        options = {"timeout": timeout} if timeout is not None else {}
        response = client.post("/chat/completions", body=body, cast_to=object, options=options)
        if isinstance(response, str):
            # the text of an answer not labelled JSON; chat.completions.create would still
            # read it as JSON (a proxy may call a completion text/plain)
            response = json_or_text(response)
        if not is_chat_completion(response):
            raise self.unreadable(response, "a chat completion")
        return parse_response(response, turn)


#: the request body's encoder, made once (``json.dumps`` with options makes one per call)
BODY_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))

#: where ``--openenv-llm-client=http`` sends requests without ``--openenv-llm-endpoint``
OFFICIAL_BASE_URL = "https://api.openai.com/v1"


class OpenAIHTTPPolicy(OpenAIPolicy):
    """The same requests and answers as ``OpenAIPolicy``, carried by ``http_client``."""

    sdk: ClassVar[str] = ""

    def load(self, *, strict: bool) -> None:
        """Nothing to import: the standard library carries the requests."""

    def _new_client(self, api_key: str) -> Any:
        from .http_client import ChatEndpoint

        base_url = self.config.base_url or os.environ.get("OPENAI_BASE_URL") or OFFICIAL_BASE_URL
        return ChatEndpoint(
            base_url,
            api_key,
            max_retries=self.config.max_retries,
            on_attempt=self._count,
            on_answer=self.overload.observe_response,
        )

    def _count(self) -> None:
        self.count_attempt(None)

    def _complete(self, client: Any, turn: Turn, timeout: float | None) -> Reply:
        body = self._body(turn)
        data = BODY_JSON.encode(body).encode("utf-8")
        answer = client.post(data, timeout or self.config.request_timeout, turn.deadline)
        # as the SDK reads it: JSON when it parses (a proxy may call it text/plain), else text
        response: Any = answer.decoded()
        if not is_chat_completion(response):
            raise self.unreadable(response, "a chat completion")
        return parse_response(response, turn)

    def _is_timeout(self, exc: Exception) -> bool:
        return isinstance(exc, EndpointTimeout)

    def _classify(self, exc: Exception, timeout: float | None) -> Failure | None:
        from .http_client import DEFAULT_MAX_RETRIES

        retries = (
            self.config.max_retries if self.config.max_retries is not None else DEFAULT_MAX_RETRIES
        )
        if isinstance(exc, EndpointTimeout):
            return self._timed_out(timeout, retries)
        if isinstance(exc, EndpointUnreachable):
            cause = exc.__cause__
            why = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
            return self._unreachable(why, retries)
        if isinstance(exc, EndpointStatus):
            return self._status_failure(exc, exc.headers, retries)
        return None


def uses_http_client(settings: Settings) -> bool:
    """Whether ``--openenv-policy=openai`` requests go through ``http_client`` (not the SDK).

    ``auto``: for ``--openenv-llm-endpoint``, a self-hosted server that needs nothing of the
    SDK but the wire format; the official API keeps the SDK (``OPENAI_BASE_URL``, its auth
    and headers, whatever OpenAI changes next).
    """
    client = settings.llm.client
    return client == "http" or (client == "auto" and bool(settings.llm.endpoint))


def build_openai_policy(
    settings: Settings, overload: OverloadSignal | None = None
) -> RemoteModelPolicy:
    """``--openenv-policy=openai``: model, SDK (unless the standard library carries the
    requests) and key checked before any episode."""
    cls = OpenAIHTTPPolicy if uses_http_client(settings) else OpenAIPolicy
    return checked_remote_policy(cls, settings, overload, example_model="gpt-4o-mini")
