"""OpenEnv's harness wording for reasoning_gym datasets (``--openenv-prompt-style openenv``).

What ``openenv collect`` writes for a reasoning_gym env (its session factory,
``envs/reasoning_gym_env/harness.py`` in the OpenEnv repository): no system message,
the question alone as the user message, one tool ``answer(answer)`` with OpenEnv's
description, and the tool result as the sorted JSON of ``{answer, score,
correct_answer, reward, done}``.
"""

from __future__ import annotations

import json

from ..base import ProposedCall, StepResult, ToolSpec

ANSWER = ToolSpec(
    name="answer",
    description="Submit the final answer for the current question.",
    parameters={
        "type": "object",
        "properties": {
            "answer": {
                "type": "string",
                "description": "The answer to submit.",
            },
        },
        "required": ["answer"],
    },
)


def task_prompt(first: StepResult) -> str:
    question = first.observation.get("question")
    return "" if question is None else str(question)


def tool_result(call: ProposedCall, result: StepResult) -> str:
    observation = result.observation
    data = {
        "answer": call.arguments.get("answer"),
        "score": observation.get("score"),
        "correct_answer": observation.get("correct_answer"),
        "reward": result.reward,
        "done": result.done,
    }
    # the harness's own serialisation of a tool result's data (sorted keys, ASCII)
    return json.dumps(data, sort_keys=True, default=str)
