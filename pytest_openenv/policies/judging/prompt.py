"""What the judge model is asked: its instructions, the rubric, the episode as text.

The instructions and the transcript's layout are part of the run identity (their digest,
``PROMPT_SHA256``): a change to either changes what every verdict means, so a resume of a
judged folder with other wording is refused as a resume with another rubric is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

#: the rubric when none is given
DEFAULT_RUBRIC = (
    "The episode passes if the agent did the task it was given in the first user message, "
    "correctly and completely, using the tools as the task asks. It fails if the agent gave "
    "up, answered wrongly, did something else, or the transcript does not show the task done."
)

INSTRUCTIONS = """You are a strict judge of one episode of an AI agent acting in an environment \
through tool calls. Read the rubric and the transcript, then decide whether the episode \
passes the rubric.

Answer with one JSON object and nothing else, of exactly this form:
{"passed": true or false, "score": a number from 0 to 1, "reasoning": "one short paragraph"}

"score" is how well the episode meets the rubric (1: fully); "passed" is your verdict; \
"reasoning" says why, citing what the transcript shows."""

#: a transcript message's text past this is cut (a model's runaway output is not sent whole)
MAX_MESSAGE_CHARS = 4000
PROMPT_SHA256 = hashlib.sha256(
    f"{INSTRUCTIONS}\n{MAX_MESSAGE_CHARS}\nlayout:1".encode()
).hexdigest()


class Transcript(Protocol):
    """What the judge reads of an episode (a played ``Episode``, or a saved row's fields)."""

    env: str
    messages: list[dict[str, Any]]
    reward: float
    done: bool


def rubric_sha256(rubric: str) -> str:
    return hashlib.sha256(rubric.encode("utf-8")).hexdigest()


def cut(text: str) -> str:
    if len(text) <= MAX_MESSAGE_CHARS:
        return text
    return f"{text[:MAX_MESSAGE_CHARS]}... ({len(text) - MAX_MESSAGE_CHARS} more characters)"


def message_text(message: dict[str, Any]) -> str:
    """One message as the judge reads it: who spoke, what they said, the calls they made."""
    role = str(message.get("role") or "?")
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    parts = [cut(str(content or ""))]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
        parts.append(f"[tool call] {function.get('name')}({cut(arguments)})")
    if role == "tool" and message.get("name"):
        role = f"tool {message['name']}"
    return f"### {role}\n" + "\n".join(part for part in parts if part)


def judge_messages(episode: Transcript, rubric: str) -> list[dict[str, str]]:
    """The judge's conversation: its instructions, then the rubric and the episode."""
    body = "\n\n".join(message_text(m) for m in episode.messages if m.get("role") != "system")
    user = (
        f"## Rubric\n{rubric.strip()}\n\n"
        f"## Environment\n{episode.env}: the episode ended with reward {episode.reward:g}, "
        f"{'the environment ended it' if episode.done else 'the environment never ended it'}.\n\n"
        f"## Transcript\n{body}\n\n"
        "Answer with the JSON object only."
    )
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": user}]
