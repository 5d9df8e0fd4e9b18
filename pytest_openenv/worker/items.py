"""What a worker keeps on each episode item between its hooks (pytest's per-item stash).

The spec is set at collection and read by the ``episode`` fixture, run-ahead and the
report; the finished episode, its row made ahead (run-ahead) and the episode error live
from setup until the item's last report has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..episode.record import PreparedRow
    from ..episode.result import Episode
    from ..episode.spec import EpisodeSpec

SPEC_KEY: pytest.StashKey[EpisodeSpec] = pytest.StashKey()
EPISODE_KEY: pytest.StashKey[Episode] = pytest.StashKey()
#: the finished episode's row, made on run-ahead's thread for the report to finish
PREPARED_KEY: pytest.StashKey[PreparedRow] = pytest.StashKey()
ERROR_KEY: pytest.StashKey[str] = pytest.StashKey()
#: why this episode's error stops the whole run (the response cache cannot be written)
STOP_KEY: pytest.StashKey[str] = pytest.StashKey()
#: an item of the bundled test that needs none of pytest's fixture lookups: the setup hook
#: plays its episode and hands pytest the values (``fixtures.EpisodeFixture``)
PLAYS_DIRECTLY: pytest.StashKey[bool] = pytest.StashKey()


def spec_of(item: pytest.Item) -> EpisodeSpec | None:
    """The episode an item plays; None for an item that is not an episode."""
    return item.stash.get(SPEC_KEY, None)
