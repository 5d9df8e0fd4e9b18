"""The generic family's verdict reads the outcome an OpenEnv server states, and says what decided.

The servers (``tests/servers/openenv_servers.py``) behave as OpenEnv's own on the points
at stake: a grid charges -0.1 a step before its +1 goal (``grid_world_env``), a maze states
``metadata.status`` with rewards that total below 0 for a win (``maze_env``), a board game
penalises an illegal move and states its result only in its state (``chess_env``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import played_rows as rows
from helpers import read_jsonl
from servers.openenv_servers import serve_in_thread

POLICIES = """
def to_goal(messages, tools):
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return {"name": "step", "arguments": {"action": "DOWN" if turn % 2 == 0 else "RIGHT"}}


def go_right(messages, tools):
    return {"name": "step", "arguments": {"action": 1}}


def go_left(messages, tools):
    return {"name": "step", "arguments": {"action": 0}}


def blunder_then_win(messages, tools):  # 5 counters: an illegal move, take 2, then take 2
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return {"name": "step", "arguments": {"move": "9" if turn == 0 else "2"}}


def lose_the_race(messages, tools):  # 5 -2-> 3 -1-> 2 -1-> 1: black takes the last
    turn = sum(1 for m in messages if m["role"] == "assistant")
    return {"name": "step", "arguments": {"move": "2" if turn == 0 else "1"}}


def stand_still(messages, tools):
    return {"name": "step", "arguments": {"action": "UP"}}
"""


@pytest.fixture
def policies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(policies=POLICIES)


def run_generic(run_pytest, kind: str, label: str, policy: str, *extra: str) -> Any:
    with serve_in_thread(kind) as server:
        return run_pytest(
            f"--openenv-env=openenv:{label}",
            f"--openenv-server={server.url}",
            f"--openenv-policy=policies:{policy}",
            "--openenv-n=2",
            "-n",
            "0",
            *extra,
        )


def test_a_goal_reached_behind_step_penalties_passes_on_its_last_step(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    result = run_generic(run_pytest, "grid_world", "grid_world_env", "to_goal")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    found = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert len(found) == 2
    for row in found:
        assert row["reward"] == pytest.approx(0.3)  # 7 steps at -0.1, then +1
        assert row["extra"]["judged_by"] == "last-step-reward"
        assert "the last step's reward >= 1" in row["extra"]["verdict_rule"]
        assert "guessed" in row["extra"]["verdict_rule"]


@pytest.mark.slow
def test_a_run_judged_by_a_guessed_threshold_warns_at_start_with_the_option(
    run_pytest, policies: None
) -> None:
    result = run_generic(run_pytest, "grid_world", "grid_world_env", "to_goal")
    out = result.stdout.str()
    assert "states no outcome" in out and "--openenv-min-reward" in out
    # the option set: the rule is the run's, no warning
    quiet = run_generic(
        run_pytest, "grid_world", "grid_world_env", "to_goal", "--openenv-min-reward=0.2"
    )
    assert "states no outcome" not in quiet.stdout.str()


def test_an_episode_that_never_reaches_the_goal_is_unfinished_and_names_the_turn_option(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    result = run_generic(run_pytest, "grid_world", "grid_world_env", "stand_still")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for row in rows(pytester.path / "openenv-results"):
        reason = row["extra"]["reason"]
        assert "the generic family's default of 10 turns" in reason
        assert "--openenv-max-turns" in reason


@pytest.mark.parametrize(
    ("policy", "passed", "stated"),
    [("go_right", True, "'win' (win)"), ("go_left", False, "'lose' (loss)")],
)
def test_the_outcome_a_maze_states_in_its_metadata_decides(
    run_pytest, pytester: pytest.Pytester, policies: None, policy: str, passed: bool, stated: str
) -> None:
    result = run_generic(run_pytest, "status_maze", "maze_env", policy)
    assert result.ret == (pytest.ExitCode.OK if passed else pytest.ExitCode.TESTS_FAILED)
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 2
    for row in found:
        assert row["passed"] is passed
        assert row["reward"] < 0  # the total says nothing: a won maze totals -1
        assert row["extra"]["judged_by"] == "outcome-field"
        assert row["extra"]["verdict_rule"] == f"the server's metadata.status={stated}"
    assert "states no outcome" not in result.stdout.str()


def test_a_won_game_with_an_illegal_move_penalty_passes_on_the_result_its_state_gives(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    result = run_generic(run_pytest, "take_away", "take_away", "blunder_then_win")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    found = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert len(found) == 2
    for row in found:
        assert row["reward"] == pytest.approx(0.9)
        assert row["extra"]["judged_by"] == "outcome-field"
        assert row["extra"]["verdict_rule"] == "the server's state.result='1-0' (win)"


def test_a_lost_game_fails_on_the_result_its_state_gives_and_says_it_once(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    result = run_generic(
        run_pytest, "take_away", "take_away", "lose_the_race", "--openenv-failure-reports=0"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for row in rows(pytester.path / "openenv-results"):
        assert row["extra"]["reason"] == (
            "fail: the server states state.result='0-1' (loss; reward -1)"
        )
    out = result.stdout.str()
    assert "fail: fail:" not in out
    result.stdout.fnmatch_lines(["*FAILED*reward=-1 turns=2 fail: the server states*"])


def test_the_card_and_summary_name_the_rule_that_decided(
    run_pytest, pytester: pytest.Pytester, policies: None
) -> None:
    run_generic(run_pytest, "grid_world", "grid_world_env", "to_goal")
    folder = pytester.path / "openenv-results"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["verdict_rules"] == {
        "last-step-reward": {
            "episodes": 2,
            "rule": "the last step's reward >= 1 (earlier steps scored too)",
            "guessed": True,
        }
    }
    card = (folder / "README.md").read_text()
    assert "the environment's verifier as the assertion" not in card
    assert "a threshold the plugin guessed" in card
    assert "--openenv-min-reward" in card
