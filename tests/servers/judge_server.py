"""A judge "model" on 127.0.0.1: an OpenAI-compatible server that answers a judge's request
with a verdict, and a policy's request (one with tools) as ``openai_compat`` does.

The verdict follows the rubric, so a test chooses it by the rubric it passes:

- ``say "WORD"`` in the rubric: the episode passes iff WORD appears in the transcript;
- ``reward at least R``: it passes iff the episode's reward (as the judge is told) is >= R;
- ``answer prose``, ``answer nothing``, ``answer wrong-json``: the judge fails to answer as
  asked (a refusal in prose, an empty answer, JSON without the verdict's fields).

``judge_requests`` counts the judge's requests, ``policy_requests`` the policy's (with
tools): a rescore must send none of the latter.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from .fake_model import Decision, Faults
from .openai_compat import OpenAICompatServer, _text

SAY = re.compile(r'say "([^"]+)"')
REWARD_AT_LEAST = re.compile(r"reward at least (-?[0-9.]+)")
REWARD_TOLD = re.compile(r"ended with reward (-?[0-9.e+-]+)")


def verdict_for(prompt: str) -> str:
    """The judge's answer to one request's user message (rubric, then transcript)."""
    rubric, _, transcript = prompt.partition("## Transcript")
    if "answer prose" in rubric:
        return "I'm sorry, I can't help with judging this conversation."
    if "answer nothing" in rubric:
        return ""
    if "answer wrong-json" in rubric:
        return json.dumps({"verdict": "yes"})
    said = SAY.search(rubric)
    if said:
        word = said.group(1)
        passed = word in transcript
        why = f"the transcript {'shows' if passed else 'never shows'} the agent saying {word}"
        return json.dumps({"passed": passed, "score": 1.0 if passed else 0.0, "reasoning": why})
    floor = REWARD_AT_LEAST.search(rubric)
    told = REWARD_TOLD.search(prompt)
    if floor and told:
        reward = float(told.group(1))
        passed = reward >= float(floor.group(1))
        why = f"the episode's reward {reward:g} is {'at least' if passed else 'below'} the bar"
        verdict = {"passed": passed, "score": 0.5 if passed else 0.1, "reasoning": why}
        return f"```json\n{json.dumps(verdict)}\n```"  # a fenced answer is read too
    return json.dumps(
        {"passed": False, "score": 0.0, "reasoning": "the rubric asks nothing I read"}
    )


class JudgeServer(OpenAICompatServer):
    def __init__(self, faults: Faults | None = None, **kwargs: Any) -> None:
        super().__init__(faults, **kwargs)
        self.judge_requests = 0
        self.policy_requests = 0

    def completion(self, body: dict[str, Any], decision: Decision, usage: tuple[int, int]) -> Any:
        if body.get("tools"):
            with self._lock:
                self.policy_requests += 1
            return super().completion(body, decision, usage)
        with self._lock:
            self.judge_requests += 1
        messages = body.get("messages") or []
        prompt = _text(messages[-1].get("content")) if messages else ""
        answer = verdict_for(prompt)
        return super().completion(body, Decision(answer, ()), usage)


@contextlib.contextmanager
def serve_judge(faults: Faults | None = None, **kwargs: Any) -> Iterator[JudgeServer]:
    """Start the judge server, yield it (``base_url``, ``judge_requests`` ...), stop it."""
    server = JudgeServer(faults, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()
