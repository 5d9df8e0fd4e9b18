"""The reasoning_gym family on its embedded backend: prompt, tool, oracle, verdict, errors."""

from __future__ import annotations

import json

import pytest
import reasoning_gym

from pytest_openenv.envs.base import ActionRejected, EnvConfigError, ProposedCall
from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.base import Policy, Reply, ToolCall, Turn
from pytest_openenv.policies.scripted import ScriptedPolicy


class Answers(Policy):
    """Sends the given answer texts, one per turn."""

    name = "answers"

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    def act(self, turn: Turn) -> Reply:
        arguments = json.dumps({"answer": self.answers[turn.turn - 1]})
        return Reply(tool_calls=(ToolCall(f"c{turn.turn}", "answer", arguments),))


def spec(seed: int) -> EpisodeSpec:
    return EpisodeSpec(env="reasoning_gym:chain_sum", index=seed, seed=seed)


def test_question_is_the_size_one_dataset_of_the_episode_seed() -> None:
    family = build_family("reasoning_gym:chain_sum", {})
    episode = run_episode(spec(11), EnvFactory(family), ScriptedPolicy())
    entry = reasoning_gym.create_dataset("chain_sum", size=1, seed=11)[0]
    assert entry["question"] in episode.messages[1]["content"]
    assert episode.task["answer"] == entry["answer"]
    assert [t["function"]["name"] for t in episode.tools] == ["answer"]
    assert episode.passed and episode.reward == 1.0 and episode.outcome == "correct"


def test_dataset_config_reaches_the_generator() -> None:
    family = build_family("reasoning_gym:chain_sum", {"min_terms": 5, "max_terms": 5})
    episode = run_episode(spec(2), EnvFactory(family), ScriptedPolicy())
    expression = episode.messages[1]["content"].split(":", 1)[1].split("=")[0]
    assert expression.count("+") + expression.count("-") == 4


def test_a_wrong_answer_is_scored_by_the_dataset_and_fails() -> None:
    family = build_family("reasoning_gym:chain_sum", {})
    episode = run_episode(spec(4), EnvFactory(family), Answers("not a number"))
    assert episode.done and episode.reward == 0.0
    assert not episode.passed and episode.outcome == "wrong"
    assert "Correct answer:" in episode.messages[-1]["content"]


def test_a_bare_number_is_accepted_as_the_answer_text() -> None:
    family = build_family("reasoning_gym:chain_sum", {})
    truth = int(reasoning_gym.create_dataset("chain_sum", size=1, seed=5)[0]["answer"])
    episode = run_episode(spec(5), EnvFactory(family), Answers(truth))
    assert episode.passed


def test_malformed_calls_are_tool_errors() -> None:
    family = build_family("reasoning_gym:chain_sum", {})
    current = family.embedded_backend().reset(seed=0, episode_id="ep")
    with pytest.raises(ActionRejected, match="only tool is answer"):
        family.to_action(ProposedCall("submit", {"answer": "1"}), current)
    with pytest.raises(ActionRejected, match="missing argument answer"):
        family.to_action(ProposedCall("answer", {}), current)
    with pytest.raises(ActionRejected, match="must be a string"):
        family.to_action(ProposedCall("answer", {"answer": ["1"]}), current)


def test_unknown_dataset_lists_close_names() -> None:
    with pytest.raises(
        EnvConfigError, match=r"unknown reasoning_gym dataset 'chain_summ'.*chain_sum"
    ):
        build_family("reasoning_gym:chain_summ", {})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"seed": 3}, "may not set"),
        ({"size": 3}, "may not set"),
        ({"no_such_option": 1}, "could not build 'chain_sum'.*no_such_option"),
    ],
)
def test_bad_dataset_config_is_a_config_error(config: dict, message: str) -> None:
    with pytest.raises(EnvConfigError, match=message):
        build_family("reasoning_gym:chain_sum", config)
