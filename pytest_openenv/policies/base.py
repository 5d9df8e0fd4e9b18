"""The policy interface: given the conversation so far, produce the assistant's turn.

Every policy (scripted, random, OpenAI, Anthropic, a user's callable, a cache in
front of any of them) is a ``Policy``: one ``act`` call per turn, sync, safe to
call from several threads at once for different episodes.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

# defined with every other exception; importable here, where implementers look for them
from ..errors import AnswerTooLarge
from ..errors import ContextExhausted as ContextExhausted
from ..errors import PolicyUnavailable as PolicyUnavailable
from ..proposals import ProposedCall
from ..util.jsonlimits import MAX_ANSWER_BYTES


def content_text(content: Any) -> str:
    """A message's text: a string, or OpenAI content parts (``[{"type": "text", ...}]``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


@dataclass(frozen=True)
class ToolCall:
    """A tool call as a model emitted it: ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_proposed(cls, call: ProposedCall, call_id: str) -> ToolCall:
        return cls(id=call_id, name=call.name, arguments=json.dumps(call.arguments))


#: tokens one answer may report: past it a count is unreadable, not a figure. No model's
#: context window comes near a billion tokens; a 400-digit count is a broken endpoint, and
#: summed or priced it would overflow every figure it reaches.
MAX_ANSWER_TOKENS = 10**9


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: answers whose usage was missing or not a count (each taken as 0 tokens): spend that
    #: no token or cost budget can see
    unknown: int = 0

    @classmethod
    def reported(cls, prompt_tokens: Any, completion_tokens: Any) -> Usage:
        """What an endpoint reported, as counts (see ``readable_count``). One count missing
        or unreadable makes the answer's usage unknown: both are taken as 0, since the
        other is no more to be trusted (usage is a figure of the run, not a verdict: never
        a traceback, never negative)."""
        prompt, completion = readable_count(prompt_tokens), readable_count(completion_tokens)
        if prompt is None or completion is None:
            return cls.missing()
        return cls(prompt, completion)

    @classmethod
    def missing(cls) -> Usage:
        """An answer that reported no usage at all (``usage: null`` or none)."""
        return cls(unknown=1)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.unknown + other.unknown,
        )


def readable_count(value: Any) -> int | None:
    """A token count an endpoint (or a cache file) reported; None where it is not one.

    Endpoints are not all careful: ``"abc"``, ``Infinity``, ``NaN`` (Python's JSON reads
    both), ``-7000000``, ``true`` or a 400-digit number are not a count.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():  # NaN, inf: False
        value = int(value)
    if isinstance(value, int) and 0 <= value <= MAX_ANSWER_TOKENS:
        return value
    return None


def check_answer_size(reply: Reply, policy: str, max_bytes: int | None = None) -> None:
    """A reply past ``MAX_ANSWER_BYTES`` (content and tool-call arguments) is refused.

    Whatever policy made it (a callable, a local checkpoint, a cache entry): the row
    would carry it whole, and every later turn would send it back to the model.
    """
    cap = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    # characters first: no encoding of a short answer is needed to see it is short
    size = len(reply.content)
    for call in reply.tool_calls:
        size += len(call.arguments) + len(call.name)
    if size * 4 <= cap:
        return
    size = len(reply.content.encode("utf-8", "surrogatepass")) + sum(
        len(c.arguments.encode("utf-8", "surrogatepass")) + len(c.name.encode("utf-8"))
        for c in reply.tool_calls
    )
    if size > cap:
        raise AnswerTooLarge(
            f"policy {policy} answered {size} bytes (content and tool-call arguments), over "
            f"the {cap}-byte cap on one model answer; no --openenv-max-tokens comes near it"
        )


@dataclass(frozen=True)
class Reply:
    """One assistant turn."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)

    def to_openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.tool_calls:
            message["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        return message


@dataclass(frozen=True)
class Turn:
    """What a policy sees on one turn."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    episode_id: str
    seed: int
    turn: int
    repeat: int = 0
    #: The family's scripted move (first legal action, oracle answer), if any.
    scripted: ProposedCall | None = None
    #: Every legal call, when the env can enumerate them.
    legal: list[ProposedCall] | None = None
    #: The env's expert move (a search), when the policy ``wants_expert``.
    expert: ProposedCall | None = None
    #: ``time.monotonic()`` by which the episode must end (``--openenv-timeout``), or None.
    #: Policies that wait on a network bound each request by it.
    deadline: float | None = None


class Policy(ABC):
    #: Recorded as ``policy`` in every row.
    name: ClassVar[str] = "policy"
    #: Recorded as ``model`` in every row.
    model: str | None = None
    #: Whether ``Turn.legal`` should be filled in (enumerating legal calls has a cost).
    wants_legal: ClassVar[bool] = False
    #: Whether ``Turn.expert`` should be filled in (the expert's move is a search).
    wants_expert: ClassVar[bool] = False

    @abstractmethod
    def act(self, turn: Turn) -> Reply: ...

    def load(self, *, strict: bool) -> None:  # noqa: B027 - optional: most need no imports
        """Import now what ``act`` will need, in a process that plays episodes (see
        ``RemoteModelPolicy.load``); ``strict``: a failed import is a usage error."""

    def close(self) -> None:  # noqa: B027 - optional: most policies hold no resources
        pass

    def cache_identity(self) -> tuple[str, dict[str, Any]] | None:
        """For ``--openenv-cache`` keys: the provider and what else decides the answers
        (sampling, a checkpoint's fingerprint); None: keyed by the policy's spec alone."""
        return None

    def describe(self) -> dict[str, Any]:
        """Run configuration for metadata.json (never secrets)."""
        return {"policy": self.name, "model": self.model}
