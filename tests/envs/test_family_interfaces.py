"""``EnvFamily`` is six small interfaces: a family writes five methods, the rest has defaults."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_openenv.envs.base import (
    ActionRejected,
    Backend,
    Backends,
    EnvConfigError,
    EnvFamily,
    Hosting,
    Prompts,
    ProposedCall,
    StepResult,
    Teachers,
    ToolCalls,
    ToolSpec,
    Verdict,
)
from pytest_openenv.envs.verdict import PassRule
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.base import Policy, Reply, ToolCall, Turn

REQUIRED = {"describe_task", "describe_result", "tools", "to_action", "embedded_backend"}


class Coin(Backend):
    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        self.side = "heads" if seed % 2 else "tails"
        return StepResult({"hint": self.side})

    def step(self, action: dict[str, Any]) -> StepResult:
        hit = action["side"] == self.side
        return StepResult({"hint": self.side}, reward=1.0 if hit else 0.0, done=True)


class CoinFamily(EnvFamily):
    """The least a family writes: the five required methods, nothing else."""

    name = "coin"

    def describe_task(self, first: StepResult) -> str:
        return f"Say {first.observation['hint']}."

    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        return f"reward {result.reward}"

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("say", "Say a side.", {"type": "object", "properties": {}})]

    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        if call.arguments.get("side") not in ("heads", "tails"):
            raise ActionRejected("side must be heads or tails")
        return {"side": call.arguments["side"]}

    def embedded_backend(self) -> Backend:
        return Coin()


class SaysHint(Policy):
    name = "says-hint"

    def act(self, turn: Turn) -> Reply:
        side = turn.messages[-1]["content"].split()[-1].rstrip(".")
        return Reply(tool_calls=(ToolCall("c0", "say", f'{{"side": "{side}"}}'),))


def test_the_required_methods_are_the_five_of_the_first_three_concerns() -> None:
    assert EnvFamily.__abstractmethods__ == REQUIRED
    for concern in (Verdict, Teachers, Hosting):  # optional: nothing to implement
        assert not getattr(concern, "__abstractmethods__", set())
    concerns = (Prompts, ToolCalls, Backends)
    assert set().union(*(c.__abstractmethods__ for c in concerns)) == REQUIRED
    assert all(issubclass(EnvFamily, c) for c in (*concerns, Verdict, Teachers, Hosting))


def test_a_family_that_leaves_a_required_method_out_cannot_be_built() -> None:
    class NoResult(EnvFamily):
        name = "broken"
        describe_task = CoinFamily.describe_task
        tools = CoinFamily.tools
        to_action = CoinFamily.to_action
        embedded_backend = CoinFamily.embedded_backend

    with pytest.raises(TypeError, match="describe_result"):
        NoResult("x", {})


def test_a_family_of_five_methods_plays_an_episode_with_every_default() -> None:
    family = CoinFamily("fair", {"bias": 0})
    assert family.spec == "coin:fair" and family.config_json == '{"bias": 0}'
    episode = run_episode(EpisodeSpec("coin:fair", 0, 3), EnvFactory(family), SaysHint())
    assert episode.passed and episode.outcome == "pass" and episode.reward == 1.0
    assert episode.messages[0]["content"] == Prompts.system_prompt
    assert episode.task["answer"] is None  # Prompts.task_info
    # Verdict: a threshold at default_min_reward once the env says done, the default turns
    assert family.passes(0.0) and family.pass_rule() == PassRule(0.0)
    assert family.default_max_turns() == 10
    assert family.outcome(0.0, done=False) == "unfinished"
    # Teachers: no legal list, so no scripted move, and no expert
    current = StepResult({"hint": "heads"})
    assert family.scripted_call(current) is None and family.legal_calls(current) is None
    assert family.expert_problem() == "env family 'coin' has no expert teacher"
    assert family.default_policy() == "scripted"
    # Hosting: any server will do; Backends: no remote one
    family.bind_servers(("http://a:1",))
    assert family.servers == ("http://a:1",) and family.hosted_by(object()) is None
    with pytest.raises(EnvConfigError, match="env family 'coin' cannot run on a remote server"):
        family.remote_backend("http://a:1")


def test_the_scripted_default_is_the_first_legal_call_when_a_family_lists_them() -> None:
    class Listed(CoinFamily):
        def legal_calls(self, current: StepResult) -> list[ProposedCall] | None:
            return [ProposedCall("say", {"side": s}) for s in ("tails", "heads")]

    assert Listed("fair", {}).scripted_call(StepResult({})) == ProposedCall(
        "say", {"side": "tails"}
    )
