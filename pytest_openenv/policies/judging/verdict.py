"""The judge's answer: one JSON object ``{"passed", "score", "reasoning"}``, checked.

Anything else (no answer, prose, a refusal, a score that is not a number in [0, 1]) is not
a verdict: ``read_verdict`` raises ``ValueError`` saying what was wrong, which the judge
turns into an item error, never a failure of the agent.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

#: a model that wraps its JSON in a Markdown code fence, and nothing else around it
FENCED = re.compile(r"^```(?:json)?\s*\n(.*)\n```$", re.DOTALL)
#: reasoning past this is cut in the row (a runaway answer is not kept whole)
MAX_REASONING_CHARS = 4000


@dataclass(frozen=True)
class JudgeVerdict:
    """A judge's verdict on one episode: what ``judge(episode, rubric)`` returns."""

    model: str
    passed: bool
    score: float
    reasoning: str
    rubric_sha256: str
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __bool__(self) -> bool:
        return self.passed

    def explain(self) -> str:
        """For an assertion message: the verdict, its score and why."""
        word = "passed" if self.passed else "failed"
        return f"judge {self.model} {word} it (score {self.score:g}): {self.reasoning}"


def read_verdict(text: str) -> tuple[bool, float, str]:
    """``(passed, score, reasoning)`` of a judge's answer; ``ValueError`` if it is none."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the judge gave an empty answer")
    fenced = FENCED.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        value: Any = json.loads(stripped)
    except (ValueError, RecursionError):
        raise ValueError(
            f"the judge's answer is not the verdict's JSON object (a refusal or prose?): "
            f"{shorten(text)}"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"the judge's answer is JSON but not an object: {shorten(text)}")
    passed, score, reasoning = value.get("passed"), value.get("score"), value.get("reasoning")
    if not isinstance(passed, bool):
        raise ValueError(f'the judge\'s "passed" is {passed!r}, not true or false')
    if (
        isinstance(score, bool)
        or not isinstance(score, (int, float))
        or not math.isfinite(score)
        or not 0 <= score <= 1
    ):
        raise ValueError(f'the judge\'s "score" is {score!r}, not a number from 0 to 1')
    if not isinstance(reasoning, str) or not reasoning.strip():
        raise ValueError(f'the judge\'s "reasoning" is {reasoning!r}, not a text')
    return passed, float(score), reasoning.strip()[:MAX_REASONING_CHARS]


def shorten(text: str, limit: int = 200) -> str:
    text = text.strip()
    return repr(text if len(text) <= limit else f"{text[:limit]}...")
