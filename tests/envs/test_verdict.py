"""One decision per episode, and every text about its outcome made from it."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_openenv.envs.base import Backend, EnvFamily, ProposedCall, StepResult, ToolSpec
from pytest_openenv.envs.openspiel.family import OpenSpielFamily
from pytest_openenv.envs.verdict import PassRule, decide, shown_reward
from pytest_openenv.episode.loop import EnvFactory, Limits, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.base import Policy, Reply, ToolCall, Turn


def words(reward: float, done: bool, status: str) -> str:
    return status


@pytest.mark.parametrize(
    ("reward", "threshold", "shown"),
    [
        (0.9999999999999999, 1.0, "0.9999999999999999"),  # :g would say 1, a pass
        (1.0000000000000002, 1.0, "1.0000000000000002"),  # not the threshold itself either
        (0.4999999, 0.5, "0.4999999"),
        (0.684, 1.0, "0.684"),
        (0.26315789473684215, 1.0, "0.263158"),  # far from the threshold: short
        (-1.0, 0.0, "-1"),
    ],
)
def test_a_reward_is_shown_on_the_side_of_the_threshold_it_is(
    reward: float, threshold: float, shown: str
) -> None:
    assert shown_reward(reward, threshold) == shown


def test_the_decision_is_one_and_every_text_agrees_with_it() -> None:
    generic = PassRule(1.0, success_fields=("solved",))
    failed = decide(generic, reward=0.684, done=True, label=words)
    assert (failed.status, failed.label, failed.passed) == ("fail", "fail", False)
    assert failed.reason == "fail: reward 0.684 is below the pass threshold 1"
    assert failed.needs() == "pass needs reward >= 1"
    assert failed.status_line(3) == "reward=0.684 turns=3 fail"
    # a run's --openenv-min-reward replaces the rule, label and all
    lowered = generic.overridden(min_reward=0.5, judge_at=None)
    passed = decide(lowered, reward=0.684, done=True, label=words)
    assert (passed.status, passed.label, passed.reason) == ("pass", "pass", None)


def test_the_env_s_success_field_decides_unless_a_threshold_is_set() -> None:
    rule = PassRule(1.0, success_fields=("solved",))
    solved = decide(rule, reward=0.2, done=True, label=words, observation={"solved": True})
    assert solved.passed and solved.needs() == "pass needs solved=true"
    unsolved = decide(rule, reward=3.0, done=True, label=words, metadata={"solved": False})
    assert not unsolved.passed
    assert unsolved.reason == "fail: the server's solved is false (reward 3)"
    # a text "true" is not the env saying so: the reward decides
    text = decide(rule, reward=0.2, done=True, label=words, observation={"solved": "true"})
    assert not text.passed and "below the pass threshold 1" in (text.reason or "")
    plain = rule.overridden(min_reward=0.1, judge_at=None)
    assert decide(plain, reward=0.2, done=True, label=words, observation={"solved": False}).passed


def test_an_unfinished_episode_is_judged_only_where_the_env_has_no_terminal_state() -> None:
    rule = PassRule(0.5)
    out = decide(rule, reward=2.0, done=False, label=words, turn_limit=4, mistakes="0 errors")
    assert (out.status, out.passed) == ("unfinished", False)
    assert out.reason == (
        "ran out of turns: the episode did not end within --openenv-max-turns=4 (0 errors)"
    )
    judged = rule.overridden(min_reward=None, judge_at="turn-limit")
    assert decide(judged, reward=2.0, done=False, label=words, turn_limit=4).passed
    low = decide(judged, reward=0.25, done=False, label=words, turn_limit=4)
    assert (
        low.reason
        == "fail: reward 0.25 is below the pass threshold 0.5 when the turn limit (4) ended it"
    )
    # a model whose context is full did not reach the turn limit: still unfinished
    stopped = decide(judged, reward=2.0, done=False, label=words, stopped="context full")
    assert stopped.status == "unfinished" and stopped.reason == "context full"
    assert PassRule(0.0, above=True).describe() == "reward > 0"
    assert judged.describe() == (
        "reward >= 0.5, judged at the turn limit when the env never says done"
    )


def test_a_draw_says_what_the_verdict_needs() -> None:
    family = OpenSpielFamily("tic_tac_toe", {})
    rule = family.pass_rule()
    draw = decide(rule, reward=0.0, done=True, label=family.outcome)
    assert (draw.status, draw.label, draw.needs()) == ("pass", "draw", "pass needs reward >= 0")
    loss = decide(rule, reward=-1.0, done=True, label=family.outcome)
    assert loss.reason == "loss: reward -1 is below the pass threshold 0"


# -- a family that says its env has no terminal state -----------------------------------------
class Ticks(Backend):
    def reset(self, *, seed: int, episode_id: str, **options: Any) -> StepResult:
        return StepResult({"tick": 0})

    def step(self, action: dict[str, Any]) -> StepResult:
        return StepResult({"tick": 1}, reward=0.25)


class TicksFamily(EnvFamily):
    name = "ticks"
    has_terminal_state = False  # the env never says done: judge at the turn limit

    def describe_task(self, first: StepResult) -> str:
        return "Tick."

    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        return "ticked"

    def tools(self) -> list[ToolSpec]:
        return [ToolSpec("tick", "Tick.", {"type": "object", "properties": {}})]

    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        return {}

    def embedded_backend(self) -> Backend:
        return Ticks()


class Ticker(Policy):
    name = "ticker"

    def act(self, turn: Turn) -> Reply:
        return Reply(tool_calls=(ToolCall(f"c{turn.turn}", "tick", "{}"),))


def test_a_family_without_a_terminal_state_is_judged_at_the_turn_limit() -> None:
    family = TicksFamily("x", {})
    env = EnvFactory(family)
    episode = run_episode(EpisodeSpec("ticks:x", 0, 0), env, Ticker(), limits=Limits(max_turns=4))
    assert not episode.done and episode.passed and episode.reward == 1.0
    assert episode.outcome == "pass" and episode.reason is None
    assert "outcome=pass reward=1 (pass needs reward >= 0)" in episode.explain()
    # a run may say otherwise: judged only when done, so never a pass here
    strict = run_episode(
        EpisodeSpec("ticks:x", 0, 0), env, Ticker(), limits=Limits(max_turns=4, judge_at="done")
    )
    assert not strict.passed and strict.outcome == "unfinished"
    # the marker's overrides come before the run's
    marked = EpisodeSpec("ticks:x", 0, 0, min_reward=2.0)
    over = run_episode(marked, env, Ticker(), limits=Limits(max_turns=4, min_reward=0.5))
    assert not over.passed and over.min_reward == 2.0
    assert over.record()["verify_metrics"] == {
        "outcome": "fail",
        "min_reward": 2.0,
        "verdict": False,
    }


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('min_reward="1"', "openenv marker min_reward='1' is invalid: expected a number"),
        ('judge_at="end"', "openenv marker judge_at='end' is invalid: expected one of 'done'"),
    ],
)
def test_a_bad_verdict_override_in_a_marker_is_one_collection_error(
    run_pytest, pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        f"""
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, {marker})
def test_games(episode):
    assert episode.passed
"""
    )
    result = run_pytest("-n", "0")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert message in result.stdout.str()
