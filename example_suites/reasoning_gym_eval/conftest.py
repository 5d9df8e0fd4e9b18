"""The agent under evaluation.

Without ``--openenv-policy`` the suite runs a stand-in for a sampled model, so it
is green offline: the oracle answer with probability ``SKILL``, a wrong one
otherwise, drawn from a stream seeded by the episode seed *and* the repeat (each
of the K samples of a question is a distinct draw, and reruns are identical).

Evaluate a real model instead with, e.g.::

    pytest --openenv-policy=openai --openenv-model=gpt-4o-mini
"""

import json
import random

import pytest

from pytest_openenv.policies.base import Policy, Reply, ToolCall, Turn

SKILL = 0.6


class NoisyOracle(Policy):
    name = "noisy-oracle"

    def act(self, turn: Turn) -> Reply:
        answer = str(turn.scripted.arguments["answer"])
        question = turn.messages[1]["content"]
        rng = random.Random(f"sample:{question}:{turn.repeat}")
        if rng.random() >= SKILL:
            answer = str(int(answer) + 1) if answer.lstrip("-").isdigit() else "I am not sure"
        call = ToolCall(
            id=f"call_{turn.turn}", name="answer", arguments=json.dumps({"answer": answer})
        )
        return Reply(tool_calls=(call,))


@pytest.fixture
def openenv_policy(openenv_policy, pytestconfig):
    if pytestconfig.getoption("openenv_policy") is None:
        return NoisyOracle()
    return openenv_policy  # the policy named on the command line
