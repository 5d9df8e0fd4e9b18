"""``--openenv-cache DIR`` / ``--openenv-replay`` for an agent: the model calls its capture
proxy forwards, answered from the package's response cache (``policies/cache.py``).

Each call is keyed as our own loop's turns are: the agent's policy (``agent:codex``) as the
provider, the model, the sampling the agent asked for, the tools, the messages and the
episode id. An agent's requests quote its episode's own folder (a new temporary path each
run), today's date and what its adapter names as varying (Codex's measured tool call time):
each is keyed as a placeholder, so a recording replays in another run, on another day.
With ``--openenv-replay`` a miss is refused to the agent and errors its episode; no
request reaches the upstream, so the endpoint may be down.
"""

from __future__ import annotations

import datetime
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents.capture import ChatAnswer, UpstreamError
from ..agents.capture.server import Complete
from ..errors import CacheUnwritable
from ..policies.base import Reply, ToolCall, Turn, Usage
from ..policies.cache import (
    FORMAT,
    ResponseCache,
    cache_key,
    reply_to_json,
    request_parts,
)

#: the status a refused call gets: one the agents' SDKs do not retry
REFUSED = 400
#: what the chat-form request holds besides its sampling
_NOT_SAMPLING = {"messages", "tools", "model", "stream", "stream_options"}


@dataclass
class _Episode:
    episode_id: str
    root: Path
    calls: int = 0


class AgentCallCache:
    """One agent policy's calls in the response cache (a ``agents.call_store.CallStore``)."""

    def __init__(
        self,
        cache: ResponseCache,
        *,
        provider: str,
        model: str,
        replay: bool,
        volatile: tuple[str, ...] = (),
    ) -> None:
        self.cache = cache
        self.provider = provider
        self.model = model
        self.replay = replay
        #: what the agent's requests hold that differs between runs (``AgentAdapter.volatile``)
        self.volatile = [re.compile(pattern) for pattern in volatile]
        self._episodes: dict[str, _Episode] = {}
        self._lock = threading.Lock()

    def begin(self, token: str, episode_id: str, root: Path) -> None:
        with self._lock:
            self._episodes[token] = _Episode(episode_id, root)

    def end(self, token: str) -> None:
        with self._lock:
            self._episodes.pop(token, None)

    def _turn_of(self, token: str, request: dict[str, Any]) -> tuple[Turn, _Episode]:
        with self._lock:
            episode = self._episodes[token]
            episode.calls += 1
            number = episode.calls
        messages = list(request.get("messages") or [])
        tools = list(request.get("tools") or [])
        return Turn(messages, tools, episode.episode_id, seed=0, turn=number), episode

    def _scrubber(self, root: Path) -> Any:
        today = {
            datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
            datetime.date.today().isoformat(),
        }
        folders = sorted({str(root), str(root.resolve())}, key=len, reverse=True)

        def scrub(text: str) -> str:
            for folder in folders:
                text = text.replace(folder, "<episode-folder>")
            for day in today:
                text = text.replace(day, "<today>")
            for pattern in self.volatile:
                text = pattern.sub("<varies>", text)
            return self.cache.secrets.scrub(text)

        return scrub

    def forward(
        self, token: str, request: dict[str, Any], complete: Complete
    ) -> tuple[ChatAnswer, float]:
        if self.cache.broken is not None:  # no model call whose answer cannot be kept
            raise UpstreamError(REFUSED, self.cache.broken)
        turn, episode = self._turn_of(token, request)
        sampling = {k: v for k, v in request.items() if k not in _NOT_SAMPLING}
        scrub = self._scrubber(episode.root)
        key = cache_key(self.provider, self.model, sampling, turn, scrub)
        try:
            hit = self.cache.load(key)
        except ValueError as exc:
            if self.replay:
                raise UpstreamError(REFUSED, f"--openenv-replay: {exc}") from None
            hit = None
        if hit is not None:
            return answer_of(hit, self.model, key), 0.0
        if self.replay:
            raise UpstreamError(
                REFUSED,
                f"--openenv-replay: no cached response for model call {turn.turn} of "
                f"{turn.episode_id} by {self.provider} in {self.cache.root} (key {key[:12]}); "
                "record it by running once without --openenv-replay (the key covers the "
                "agent, model, sampling, tools, messages and episode id)",
            )
        answer, seconds = complete(request)
        entry = {
            "format": FORMAT,
            "key": key,
            "provider": self.provider,
            "model": self.model,
            "sampling": sampling,
            "episode_id": turn.episode_id,
            "turn": turn.turn,
            "request": request_parts(turn, scrub),
            "reply": reply_to_json(reply_of(answer)),
        }
        try:
            self.cache.store(key, entry)
        except CacheUnwritable as exc:
            raise UpstreamError(REFUSED, str(exc)) from None
        return answer, seconds


def reply_of(answer: ChatAnswer) -> Reply:
    """The stored form of an upstream answer (what our own loop's entries hold)."""
    message = answer.message
    calls = tuple(
        ToolCall(
            str(call.get("id") or ""),
            str((call.get("function") or {}).get("name") or ""),
            str((call.get("function") or {}).get("arguments") or "{}"),
        )
        for call in message.get("tool_calls") or ()
    )
    usage = answer.usage
    return Reply(
        content=str(message.get("content") or ""),
        tool_calls=calls,
        usage=Usage.reported(usage.get("prompt_tokens"), usage.get("completion_tokens")),
    )


def answer_of(reply: Reply, model: str, key: str) -> ChatAnswer:
    """A stored reply as the chat-form answer the proxy hands the agent."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    prompt = reply.usage.prompt_tokens or 0
    completion = reply.usage.completion_tokens or 0
    return ChatAnswer(
        message=message,
        finish_reason="tool_calls" if reply.tool_calls else "stop",
        usage={
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
        id=f"cached-{key[:24]}",
        model=model,
    )
