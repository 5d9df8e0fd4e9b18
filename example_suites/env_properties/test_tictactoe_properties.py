"""Property tests of the tic-tac-toe env, embedded and on a deployed OpenEnv server.

``EnvStateMachine`` plays legal and illegal moves in random orders and checks
that reward comes only at the end, a legal move exists until the game is over,
illegal moves are refused as tool errors, and a reset with the same seed replays
the same game. Hypothesis shrinks any failure to a short sequence of moves.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis.stateful import run_state_machine_as_test

from pytest_openenv.envs.registry import build_family
from pytest_openenv.testing.strategies import (
    EnvStateMachine,
    LegalSequence,
    legal_action_sequences,
    reset_backend,
)

FAST = settings(max_examples=40, stateful_step_count=15, deadline=None)


# -- embedded: the pyspiel engine in this process --------------------------------------
class TicTacToe(EnvStateMachine):
    env = "openspiel:tic_tac_toe"


class TicTacToeAsO(EnvStateMachine):
    env = "openspiel:tic_tac_toe"
    env_config = {"agent_player": 1}  # the seeded opponent opens


TestTicTacToe = TicTacToe.TestCase
TestTicTacToe.settings = FAST
TestTicTacToeAsO = TicTacToeAsO.TestCase
TestTicTacToeAsO.settings = FAST


@given(legal_action_sequences("openspiel:tic_tac_toe"))
@settings(max_examples=40, deadline=None)
def test_every_game_ends_with_a_win_draw_or_loss(game: LegalSequence):
    family = build_family("openspiel:tic_tac_toe", {})
    backend = family.embedded_backend()
    result = reset_backend(family, backend, game.seed)
    for call in game.calls:
        result = backend.step(family.to_action(call, result))
    assert game.finished and result.done
    assert result.reward in (-1.0, 0.0, 1.0)
    assert family.outcome(result.reward, result.done) in ("win", "draw", "loss")


# -- remote: the same checks over OpenEnv's WebSocket protocol -----------------------------
def test_deployed_server_keeps_the_env_contract(tictactoe_server_url):
    class RemoteTicTacToe(EnvStateMachine):
        env = "openspiel:tic_tac_toe"
        server = tictactoe_server_url

    run_state_machine_as_test(RemoteTicTacToe, settings=settings(FAST, max_examples=15))


def test_deployed_server_plays_the_same_games_as_the_embedded_engine(tictactoe_server_url):
    family = build_family("openspiel:tic_tac_toe", {})

    @given(legal_action_sequences(family))
    @settings(max_examples=15, deadline=None)
    def same_game(game: LegalSequence):
        embedded, remote = family.embedded_backend(), family.remote_backend(tictactoe_server_url)
        try:
            a = reset_backend(family, embedded, game.seed)
            b = reset_backend(family, remote, game.seed)
            for call in game.calls:
                assert a.observation["legal_actions"] == b.observation["legal_actions"]
                a = embedded.step(family.to_action(call, a))
                b = remote.step(family.to_action(call, b))
                assert (
                    a.observation["opponent_last_action"] == b.observation["opponent_last_action"]
                )
            assert (a.done, a.reward) == (b.done, b.reward)
        finally:
            embedded.close()
            remote.close()

    same_game()
