"""The episode test the plugin runs when ``--openenv-env`` is given and no paths are."""

import pytest


# ``openenv_episode``, not its short name ``episode``: a suite's conftest may define its own
def test_episode(openenv_episode):
    if not openenv_episode.passed:
        # The story of the episode says more than a traceback into this file would.
        pytest.fail(openenv_episode.explain(), pytrace=False)
