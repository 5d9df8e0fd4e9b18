"""pass@k over a few reasoning_gym datasets: one test per dataset, 5 questions each."""

import pytest


@pytest.mark.openenv("reasoning_gym:chain_sum", n=5, min_terms=2, max_terms=4)
def test_chain_sum(episode):
    assert episode.passed, episode.explain()


@pytest.mark.openenv("reasoning_gym:basic_arithmetic", n=5)
def test_basic_arithmetic(episode):
    assert episode.passed, episode.explain()


@pytest.mark.openenv("reasoning_gym:leg_counting", n=5)
def test_leg_counting(episode):
    assert episode.passed, episode.explain()
