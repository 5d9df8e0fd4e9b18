"""The run's model, as the proxy reaches it: a chat-form request in, a ``ChatAnswer`` out.

The upstream is asked for the whole answer (never a stream): the proxy records it whole and
renders the agent's stream from it, in the agent's dialect, so each dialect's stream is
written once instead of translated delta by delta from every other one. The agent sees no
byte before the whole answer: Claude Code and Codex wait five minutes for a stream's first
byte, longer than ``Upstream.timeout``'s default.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import BadInput
from ...util.secrets import KnownSecrets
from .anthropic_form import ANTHROPIC_VERSION, answer_from_anthropic, anthropic_request
from .chat_form import answer_from_chat
from .httpx_transport import HttpxTransport
from .records import ChatAnswer
from .stdlib_transport import HTTPClientTransport
from .transport import DEFAULT_TRANSPORT, Transport, UpstreamError

__all__ = ["MAX_ANSWER_BYTES", "TRANSPORTS", "Upstream", "UpstreamClient", "UpstreamError"]

#: an upstream answer larger than this is refused (a runaway server, not a model's turn)
MAX_ANSWER_BYTES = 32 * 1024 * 1024
#: the transports by name: (headers, timeout in seconds, max answer bytes) -> Transport
TRANSPORTS: dict[str, Callable[[dict[str, str], float, int], Transport]] = {
    "http.client": HTTPClientTransport,
    "httpx": HttpxTransport,
}


@dataclass(frozen=True)
class Upstream:
    """Where the proxy sends the agent's model calls."""

    #: ``http://127.0.0.1:8000/v1`` (chat: ``/chat/completions`` is appended) or
    #: ``https://api.anthropic.com`` (anthropic: ``/v1/messages``, or ``/messages`` after /v1)
    base_url: str
    dialect: Literal["chat", "anthropic"]
    #: the NAME of the environment variable holding the key (never the key); None: no key
    api_key_env: str | None
    #: the model id sent upstream, whatever the agent asked for
    model: str
    #: seconds for a whole call, connect to the answer's last byte
    timeout: float = 120.0
    #: request fields the run pins, in chat form (``temperature``, ``max_tokens``): they
    #: replace the agent's own
    extra_body: dict[str, Any] = field(default_factory=dict)
    #: how requests travel: a name in ``TRANSPORTS``
    transport: str = DEFAULT_TRANSPORT

    def url(self) -> str:
        base = self.base_url.rstrip("/")
        if self.dialect == "chat":
            return f"{base}/chat/completions"
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


class UpstreamClient:
    """One connection pool to the upstream, shared by the proxy's threads."""

    def __init__(self, upstream: Upstream, environ: dict[str, str] | None = None) -> None:
        if upstream.dialect not in ("chat", "anthropic"):
            raise BadInput(
                f"upstream dialect {upstream.dialect!r} is not one the proxy speaks; "
                "use 'chat' (an OpenAI-compatible server) or 'anthropic'"
            )
        make_transport = TRANSPORTS.get(upstream.transport)
        if make_transport is None:
            raise BadInput(
                f"upstream transport {upstream.transport!r} is not one the proxy has; "
                f"use one of {', '.join(sorted(TRANSPORTS))}"
            )
        environ = dict(os.environ if environ is None else environ)
        key = None
        if upstream.api_key_env:
            key = environ.get(upstream.api_key_env) or None
            if key is None:
                raise BadInput(
                    f"the model endpoint's key is read from ${upstream.api_key_env}, which is "
                    "not set: export it (keys are read from the environment only)"
                )
        self.upstream = upstream
        #: the key in every form it could be echoed in, hidden from what the proxy passes on
        self.secrets = KnownSecrets.collect(extra=[key], environ={})
        headers = {"Content-Type": "application/json"}
        if upstream.dialect == "anthropic":
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if key:
                headers["x-api-key"] = key
        elif key:
            headers["Authorization"] = f"Bearer {key}"
        self._transport = make_transport(headers, upstream.timeout, MAX_ANSWER_BYTES)
        self._url = upstream.url()

    def scrub(self, text: str) -> str:
        return self.secrets.scrub(text)

    def body_for(self, request: dict[str, Any]) -> dict[str, Any]:
        """The upstream request: the canonical request, the run's pins, the run's model."""
        body = {**request, **self.upstream.extra_body, "model": self.upstream.model}
        if self.upstream.dialect == "anthropic":
            return anthropic_request(body)
        body["stream"] = False
        return body

    def complete(self, request: dict[str, Any]) -> tuple[ChatAnswer, float]:
        """The upstream's answer to a chat-form request, and the seconds it took."""
        body = self.body_for(request)
        started = time.monotonic()
        try:
            status, content = self._transport.post(self._url, json.dumps(body).encode())
        except UpstreamError as exc:
            raise UpstreamError(exc.status, self.scrub(exc.message)) from exc
        seconds = time.monotonic() - started
        text = self.scrub(content.decode("utf-8", "replace"))
        if status != 200:
            raise UpstreamError(status, f"the model endpoint answered HTTP {status}: {text[:2000]}")
        try:
            payload = json.loads(text)
            if self.upstream.dialect == "anthropic":
                return answer_from_anthropic(payload, self.upstream.model), seconds
            return answer_from_chat(payload, self.upstream.model), seconds
        except ValueError as exc:
            raise UpstreamError(
                502, f"the model endpoint's answer is not one the proxy reads: {exc}"
            ) from exc

    def close(self) -> None:
        self._transport.close()
