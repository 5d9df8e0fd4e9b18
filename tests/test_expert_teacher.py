"""The ``expert`` teacher and opponent: OpenSpiel's own search bots, end to end through pytest.

Real pyspiel (alpha-beta for tic-tac-toe, C++ MCTS for connect four), a real OpenEnv
tic-tac-toe server for the remote backend, pytest itself through pytester.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl
from servers.openenv_servers import ThreadServer, serve_in_thread

from pytest_openenv.envs.base import EnvUnavailable, StepResult
from pytest_openenv.envs.registry import build_family

TTT = "--openenv-env=openspiel:tic_tac_toe"
C4 = "--openenv-env=openspiel:connect_four"


@pytest.fixture(scope="module")
def tictactoe() -> Iterator[ThreadServer]:
    with serve_in_thread("tictactoe") as server:
        yield server


def results(folder: Path) -> list[dict[str, Any]]:
    return read_jsonl(folder / "openenv-results" / "results.jsonl")


def failures(folder: Path) -> list[dict[str, Any]]:
    return read_jsonl(folder / "openenv-results" / "failures.jsonl")


def summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "openenv-results" / "summary.json").read_text())


def moves(row: dict[str, Any]) -> list[int]:
    """The agent's moves, read from the record's assistant tool calls."""
    return [
        json.loads(call["function"]["arguments"])["action_id"]
        for message in row["messages"]
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or ()
    ]


LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def completing_cells(state: Any, player: int) -> set[int]:
    """The empty cells where ``player``'s mark would finish a line of three."""
    marks = [None] * 9
    for turn, cell in enumerate(state.history()):
        marks[cell] = turn % 2
    return {
        cell
        for cell in range(9)
        if marks[cell] is None
        and any(
            cell in line and all(marks[c] == player for c in line if c != cell) for line in LINES
        )
    }


def expert_against_random(games: int) -> Iterator[tuple[Any, int]]:
    """(position, the expert's move there) for every move X made in ``games`` games."""
    import random

    import pyspiel

    from pytest_openenv.envs.openspiel.expert import ExpertSearch

    game = pyspiel.load_game("tic_tac_toe")
    search = ExpertSearch(game)
    rng = random.Random(7)
    for _ in range(games):
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.current_player() == 0:
                move = search.choose(state, seed=0)
                yield state.clone(), move
            else:
                move = rng.choice(state.legal_actions())
            state.apply_action(move)


def test_the_expert_takes_a_win_on_the_board_rather_than_a_later_one() -> None:
    # plain minimax takes the lowest-numbered winning move, so in about one position of
    # six with a win on the board it plays a move that wins two turns later instead
    positions = 0
    for state, move in expert_against_random(200):
        wins_now = completing_cells(state, 0)
        if wins_now:
            positions += 1
            assert move in wins_now, (state.history(), move, wins_now)
    assert positions > 100


def test_the_expert_blocks_a_line_when_it_has_no_win_and_prefers_the_lowest_id() -> None:
    import pyspiel

    from pytest_openenv.envs.openspiel.expert import quickest_best_move

    game = pyspiel.load_game("tic_tac_toe")
    state = game.new_initial_state()
    for cell in (4, 0, 8, 2):  # X centre and corner, O threatens 0-1-2 through 1
        state.apply_action(cell)
    assert completing_cells(state, 0) == set() and completing_cells(state, 1) == {1}
    assert quickest_best_move(game, state) == 1
    # an empty board: every move draws with best play, so the lowest id
    assert quickest_best_move(game, game.new_initial_state()) == 0


def test_a_lost_position_is_played_out_as_long_as_it_can_be() -> None:
    import pyspiel

    from pytest_openenv.envs.openspiel.expert import quickest_best_move

    game = pyspiel.load_game("tic_tac_toe")
    state = game.new_initial_state()
    for cell in (0, 1, 4):  # X threatens 0-4-8; blocking at 8 still loses to the fork at 6
        state.apply_action(cell)
    assert completing_cells(state, 0) == {8}
    # every O move loses, so plain minimax plays the lowest id, 2, and loses at once; the
    # block makes X play two more moves
    assert quickest_best_move(game, state) == 8


@pytest.mark.slow
def test_tic_tac_toe_expert_never_loses_to_random(run_pytest, pytester: pytest.Pytester) -> None:
    result = run_pytest(TTT, "--openenv-policy=expert", "--openenv-n=40", "-n", "0")
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = results(pytester.path)
    assert len(rows) == 40 and failures(pytester.path) == []
    assert all(row["reward"] >= 0 for row in rows)
    assert any(row["reward"] > 0 for row in rows), "the expert should beat a random opponent"
    # a record like any teacher's: its name, tool calls through the loop, no tool errors
    assert {row["policy"] for row in rows} == {"expert"}
    assert all(row["metrics"]["tool_errors"] == 0 and moves(row) for row in rows)
    assert summary(pytester.path)["figures"]["pass_rate"] == 1.0


@pytest.mark.slow
def test_threads_share_the_expert_and_every_thread_gets_its_own_moves(
    run_pytest, pytester: pytest.Pytester
) -> None:
    alone = run_pytest(TTT, "--openenv-policy=expert", "--openenv-n=24", "-n", "0")
    assert alone.ret == 0
    sequential = {row["episode_id"]: row["messages"] for row in results(pytester.path)}
    threaded = run_pytest(
        TTT, "--openenv-policy=expert", "--openenv-n=24", "--openenv-concurrency=4", "-n", "0"
    )
    assert threaded.ret == 0
    assert {row["episode_id"]: row["messages"] for row in results(pytester.path)} == sequential


def test_expert_against_expert_draws_every_game_via_the_marker(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_duel="""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=12, policy="expert", opponent="expert")
        def test_duel(episode):
            assert episode.passed, episode.explain()
        """
    )
    result = run_pytest("-n", "0")
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = results(pytester.path)
    assert len(rows) == 12
    assert {row["reward"] for row in rows} == {0.0}
    assert {row["policy"] for row in rows} == {"expert"}
    # both sides play the whole game: 9 cells, the agent (X) places 5 of them
    assert {len(moves(row)) for row in rows} == {5}


@pytest.mark.slow
def test_the_expert_opponent_is_never_beaten_by_a_random_agent(
    run_pytest, pytester: pytest.Pytester
) -> None:
    result = run_pytest(
        TTT,
        "--openenv-policy=random",
        "--openenv-env-config",
        '{"opponent": "expert"}',
        "--openenv-n=30",
        "-n",
        "0",
    )
    assert result.ret in (0, 1)
    rows = results(pytester.path) + failures(pytester.path)
    assert len(rows) == 30
    assert all(row["reward"] <= 0 for row in rows)
    assert any(row["reward"] < 0 for row in rows), "the expert should beat a random agent"


@pytest.mark.slow
def test_connect_four_expert_beats_random(run_pytest, pytester: pytest.Pytester) -> None:
    result = run_pytest(C4, "--openenv-policy=expert", "--openenv-n=20", "-n", "2")
    assert result.ret in (0, 1)
    rows = results(pytester.path)
    assert len(rows) >= 19, [row["failure"] for row in failures(pytester.path)]
    assert all(row["reward"] > 0 for row in rows)  # a pass here is a win, not a draw


def test_openspiel_turn_limit_defaults_to_the_agents_share_of_the_longest_game() -> None:
    # without --openenv-max-turns a connect-four game (up to 21 moves a player) is not cut
    # short by a loop limit meant for models; an explicit limit still wins
    from pytest_openenv.episode.loop import EnvFactory, Limits, _Loop
    from pytest_openenv.episode.spec import EpisodeSpec

    def limit(env: str, max_turns: int | None = None) -> int:
        factory = EnvFactory(build_family(env, {}))
        spec = EpisodeSpec(env=env, index=0, seed=0)
        limits = Limits(max_turns=max_turns)
        return _Loop(spec, factory, None, limits, None, time.monotonic).max_turns  # type: ignore[arg-type]

    assert limit("openspiel:connect_four") == 21
    assert limit("openspiel:tic_tac_toe") == 10
    assert limit("openspiel:chess") == 50
    assert limit("reasoning_gym:chain_sum") == 10
    assert limit("openspiel:connect_four", 4) == 4


@pytest.mark.slow
def test_the_same_seed_replays_the_same_mcts_games_on_any_number_of_workers(
    run_pytest, pytester: pytest.Pytester
) -> None:
    def transcripts(*args: str) -> dict[str, Any]:
        run_pytest(C4, "--openenv-policy=expert", "--openenv-n=6", *args)
        rows = results(pytester.path) + failures(pytester.path)
        return {row["episode_id"]: row["messages"] for row in rows}

    first = transcripts("--openenv-seed=5", "-n", "0")
    assert len(first) == 6
    assert transcripts("--openenv-seed=5", "-n", "2") == first
    other = transcripts("--openenv-seed=6", "-n", "0")
    # seed 6's first episode is seed 5's second one; the search and the opponent follow it
    assert other["ep-000000"] == first["ep-000001"]
    assert other != first


@pytest.mark.slow
def test_remote_tic_tac_toe_expert_plays_as_on_the_embedded_engine(
    run_pytest, pytester: pytest.Pytester, tictactoe: ThreadServer
) -> None:
    remote = run_pytest(
        TTT,
        "--openenv-policy=expert",
        "--openenv-n=20",
        f"--openenv-server={tictactoe.url}",
        "-n",
        "0",
    )
    assert remote.ret == 0, remote.stdout.str()[-3000:]
    deployed = {row["episode_id"]: row for row in results(pytester.path)}
    assert {row["extra"]["backend"] for row in deployed.values()} == {"remote"}
    embedded = run_pytest(TTT, "--openenv-policy=expert", "--openenv-n=20", "-n", "0")
    assert embedded.ret == 0
    local = {row["episode_id"]: row for row in results(pytester.path)}
    assert sorted(deployed) == sorted(local) and len(local) == 20
    for episode_id, row in deployed.items():
        # the server's opponent is seeded like the engine's: the rebuilt history must match
        assert row["messages"] == local[episode_id]["messages"], episode_id


def test_the_expert_refuses_a_history_that_does_not_match_the_env() -> None:
    family = build_family("openspiel:tic_tac_toe", {})
    # after X took cell 4 it would be O's turn, yet the env says the agent (X) moves now
    mismatch = StepResult(
        observation={"legal_actions": [0, 1, 2, 3, 5, 6, 7, 8]},
        metadata={"action_history": [4]},
    )
    with pytest.raises(EnvUnavailable, match="embedded engine"):
        family.expert_call(mismatch, seed=0)
    unknown = StepResult(observation={"legal_actions": [0, 1]})
    with pytest.raises(EnvUnavailable, match="action history"):
        family.expert_call(unknown, seed=0)


# -- usage errors, before any episode runs --------------------------------------------------
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--openenv-env=reasoning_gym:chain_sum", "--openenv-policy=expert"],
            ["--openenv-policy=expert", "reasoning_gym", "expert teacher: openspiel"],
        ),
        (
            [TTT, "--openenv-env-config", '{"opponent": "genius"}'],
            ["opponent 'genius'", "'random', 'first', 'last', 'expert'"],
        ),
        (
            ["--openenv-env=openspiel:2048", "--openenv-env-config", '{"opponent": "expert"}'],
            ["opponent 'expert' cannot play 2048", "rewards along the way"],
        ),
        (
            ["--openenv-env=openspiel:liars_dice", "--openenv-policy=expert"],
            ["--openenv-policy=expert cannot play openspiel:liars_dice", "resample"],
        ),
    ],
    ids=["no-expert-family", "unknown-opponent", "opponent-game", "policy-game"],
)
@pytest.mark.slow
def test_bad_expert_settings_are_usage_errors(
    run_pytest, pytester: pytest.Pytester, args: list[str], expected: list[str]
) -> None:
    result = run_pytest(*args, "-n", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    for part in expected:
        assert part in text, text
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()


@pytest.mark.slow
def test_expert_on_a_server_needs_a_game_it_can_rebuild(
    run_pytest, pytester: pytest.Pytester
) -> None:
    # OpenEnv's deployed openspiel server hosting catch: chance moves it never reports
    with serve_in_thread("openspiel", game="catch") as server:
        result = run_pytest(
            "--openenv-env=openspiel:catch",
            "--openenv-policy=expert",
            f"--openenv-server={server.url}",
            "-n",
            "0",
        )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert "--openenv-policy=expert cannot play openspiel:catch" in text, text
    assert "tic_tac_toe, connect_four" in text and "embedded engine" in text


@pytest.mark.slow
def test_expert_wins_connect_four_on_openenvs_deployed_openspiel_server(
    run_pytest, pytester: pytest.Pytester
) -> None:
    # the server as deployed: no seed, an unseeded random opponent, only opponent_last_action
    # to tell what it played, so the history is rebuilt from the observations alone
    with serve_in_thread("openspiel", game="connect_four") as server:
        result = run_pytest(
            C4,
            "--openenv-policy=expert",
            "--openenv-n=10",
            f"--openenv-server={server.url}",
            "-n",
            "0",
        )
    assert result.ret in (0, 1)
    rows = results(pytester.path) + failures(pytester.path)
    assert len(rows) == 10
    assert "errors" not in result.parseoutcomes(), result.stdout.str()[-3000:]
    assert all(row["done"] and row["metrics"]["tool_errors"] == 0 for row in rows)
    assert sum(row["reward"] > 0 for row in rows) >= 8


@pytest.mark.slow
def test_a_marker_asking_an_expert_of_a_family_without_one_fails_collection(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_quiz="""
        import pytest

        @pytest.mark.openenv("reasoning_gym:chain_sum", n=3, policy="expert")
        def test_quiz(episode):
            assert episode.passed
        """
    )
    result = run_pytest("-n", "0")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the run
    text = result.stdout.str()
    assert "test_quiz.py::test_quiz" in text
    assert "openenv marker policy='expert' cannot play reasoning_gym:chain_sum" in text
    assert results(pytester.path) == []
