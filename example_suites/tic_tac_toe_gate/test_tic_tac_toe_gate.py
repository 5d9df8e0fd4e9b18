"""The agent must not lose to a seeded random opponent: 30 games, one item each."""

import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=30, seed=1000)
def test_does_not_lose(episode):
    assert episode.passed, episode.explain()
