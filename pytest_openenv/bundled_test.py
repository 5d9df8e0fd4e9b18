"""The episode test the plugin runs when ``--openenv-env`` is given and no paths are."""

import pytest


def test_episode(episode):
    if not episode.passed:
        # The story of the episode says more than a traceback into this file would.
        pytest.fail(episode.explain(), pytrace=False)
