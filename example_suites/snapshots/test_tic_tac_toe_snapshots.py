"""Pin what the agent does: one readable JSON snapshot per episode.

The committed files in ``__snapshots__/test_tic_tac_toe_snapshots/`` are the
expected games. A change to the env, to how observations are shown, or to the
policy turns into a diff naming the turn and the board rows that moved. After an
intended change, rewrite them with ``pytest --snapshot-update`` (``-n 2`` works)
and review the diff like code.
"""

import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=4, policy="random", seed=100)
def test_random_agent_games(episode, openenv_snapshot):
    # A seeded random agent: its games are fixed by the seed, win or lose.
    assert episode.trajectory == openenv_snapshot


@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="scripted", opponent="first")
def test_scripted_agent_wins(episode, openenv_snapshot):
    assert episode.passed, episode.explain()
    assert episode.trajectory == openenv_snapshot
