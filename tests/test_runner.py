"""The tool-calling loop against the real embedded OpenSpiel engine."""

from __future__ import annotations

import json

import pytest

from pytest_openenv.envs.openspiel.family import OpenSpielFamily
from pytest_openenv.envs.openspiel.render import render_board
from pytest_openenv.episode.loop import EnvFactory, Limits, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.base import Policy, Reply, ToolCall, Turn
from pytest_openenv.policies.scripted import RandomPolicy, ScriptedPolicy


class Canned(Policy):
    """Plays the given raw tool calls in order, then the scripted move."""

    name = "canned"

    def __init__(self, *turns: list[tuple[str, str]] | None) -> None:
        self.turns = list(turns)

    def act(self, turn: Turn) -> Reply:
        if self.turns:
            calls = self.turns.pop(0)
            if calls is None:
                return Reply(content="I think I will win.")
            return Reply(
                tool_calls=tuple(
                    ToolCall(f"c{turn.turn}_{i}", name, args)
                    for i, (name, args) in enumerate(calls)
                )
            )
        assert turn.scripted is not None
        return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, f"c{turn.turn}"),))


def ttt(config: dict | None = None) -> EnvFactory:
    return EnvFactory(OpenSpielFamily("tic_tac_toe", config or {}))


def spec(seed: int = 0) -> EpisodeSpec:
    return EpisodeSpec(env="openspiel:tic_tac_toe", index=seed, seed=seed)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (("play_move", "{not json"), "not valid JSON"),
        (("play_move", "[" * 100_000 + "]" * 100_000), "not valid JSON"),  # too deep to read
        (("play_move", "[4]"), "must be a JSON object"),
        (("play_move", '{"action_id": "four"}'), "must be an integer"),
        (("play_move", '{"action_id": 99}'), "is not legal"),
        (("play_move", '{"cell": 4}'), "unexpected argument"),
        (("resign", "{}"), "unknown tool 'resign'"),
    ],
)
def test_agent_mistakes_are_tool_errors_that_cost_a_turn(call, error) -> None:
    episode = run_episode(spec(), ttt(), Canned([call]), limits=Limits(max_turns=10))
    assert episode.done
    assert episode.metrics["tool_errors"] == 1
    tool_msg = episode.messages[3]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "c1_0"
    assert error in tool_msg["content"]
    assert len(tool_msg["content"]) < 1000, "the model's runaway output was echoed whole"
    assert error in episode.tool_trace[0]["result"]["error"]
    assert episode.steps[1]["error"]


def test_no_tool_call_gets_a_reminder_and_costs_a_turn() -> None:
    episode = run_episode(spec(), ttt(), Canned(None), limits=Limits(max_turns=10))
    assert episode.messages[2] == {"role": "assistant", "content": "I think I will win."}
    assert (
        episode.messages[3]["role"] == "user"
        and "did not call a tool" in episode.messages[3]["content"]
    )
    scripted = run_episode(spec(), ttt(), ScriptedPolicy())
    assert episode.turns == scripted.turns + 1


def test_several_calls_in_one_turn_each_get_a_tool_message() -> None:
    calls = [("play_move", '{"action_id": 0}'), ("play_move", '{"action_id": 0}')]
    episode = run_episode(spec(), ttt(), Canned(calls))
    assistant = episode.messages[2]
    ids = [c["id"] for c in assistant["tool_calls"]]
    replies = [m for m in episode.messages[3:5] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in replies] == ids
    assert "is not legal" in replies[1]["content"]  # cell 0 is taken by the first call


def test_running_out_of_turns_is_a_failure_with_a_reason() -> None:
    bad = [("play_move", '{"action_id": 42}')]
    episode = run_episode(spec(), ttt(), Canned(bad, bad, bad), limits=Limits(max_turns=3))
    assert not episode.done and not episode.passed
    assert "ran out of turns" in (episode.reason or "")
    assert episode.turns == 3


def test_messages_are_openai_chat_format() -> None:
    episode = run_episode(spec(3), ttt(), RandomPolicy())
    roles = [m["role"] for m in episode.messages]
    assert roles[:2] == ["system", "user"]
    for message in episode.messages:
        if message["role"] == "assistant":
            for call in message["tool_calls"]:
                assert isinstance(call["function"]["arguments"], str)
                json.loads(call["function"]["arguments"])
        if message["role"] == "tool":
            assert isinstance(message["content"], str) and message["tool_call_id"]
    assert episode.tools[0]["function"]["name"] == "play_move"


def test_min_reward_overrides_the_family_verdict() -> None:
    draw_or_win = run_episode(spec(0), ttt(), ScriptedPolicy())
    strict = run_episode(spec(0), ttt(), ScriptedPolicy(), limits=Limits(min_reward=2.0))
    assert draw_or_win.reward == strict.reward
    assert not strict.passed and "below the pass threshold 2" in (strict.reason or "")


def test_tic_tac_toe_board_puts_marks_in_the_right_cells() -> None:
    import pyspiel

    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    state.apply_action(4)  # X (player 0) takes the centre
    state.apply_action(0)  # O takes the top-left corner
    state.apply_action(8)  # X takes the bottom-right corner
    board = render_board("tic_tac_toe", state.observation_tensor(0), 0)
    assert board is not None
    cells = [c.strip() for row in board.split("\n---+---+---\n") for c in row.split("|")]
    assert cells == ["O", "1", "2", "3", "X", "5", "6", "7", "X"]
    # pyspiel's own rendering agrees cell by cell
    assert str(state).replace("\n", "") == "o...x...x"


def test_first_prompt_shows_board_and_legal_actions() -> None:
    episode = run_episode(spec(), ttt({"agent_player": 1, "opponent": "first"}), ScriptedPolicy())
    prompt = episode.messages[1]["content"]
    assert "You play O (player 1)" in prompt
    assert "opened with action 0" in prompt
    assert " X | 1 | 2" in prompt
    assert "Legal actions: 1, 2, 3, 4, 5, 6, 7, 8" in prompt


def test_connect_four_board_is_drawn_from_the_bottom() -> None:
    episode = run_episode(
        EpisodeSpec(env="openspiel:connect_four", index=0, seed=0),
        EnvFactory(OpenSpielFamily("connect_four", {"opponent": "first"})),
        Canned([("play_move", '{"action_id": 3}')]),
        limits=Limits(max_turns=1),
    )
    board = episode.messages[3]["content"].split("Board:\n")[1].splitlines()[:7]
    assert board[-1] == "0 1 2 3 4 5 6"
    assert board[-2] == "o . . x . . ."  # we dropped in column 3, the opponent in column 0


def test_random_policy_is_reproducible_per_seed() -> None:
    a = run_episode(spec(11), ttt(), RandomPolicy())
    b = run_episode(spec(11), ttt(), RandomPolicy())
    assert a.trajectory == b.trajectory
