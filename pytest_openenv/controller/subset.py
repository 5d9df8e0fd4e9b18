"""Runs that play a chosen subset of the test set's episodes, which no gate can pass on.

``--lf`` (pytest's cache: run only what failed last time) without ``--openenv-resume``
plays the episodes that failed before and nothing else: the folder then holds only
them, and a gate over them judges the re-runs, not the dataset (one that failed at 75%
passes when the re-runs pass). With ``--openenv-resume`` the folder's earlier rows are
counted too (``Accounts.count_rest_of_folder``), so the whole dataset is judged.
"""

from __future__ import annotations

import pytest

from ..config.settings import Settings
from .accounts import episode_id_from_nodeid


def last_failed_episodes(config: pytest.Config, settings: Settings) -> int | None:
    """How many episodes ``--lf`` re-runs (read before the run changes the cache), or None
    when the run judges its whole test set."""
    if settings.output.resume or not config.getoption("lf", False):
        return None
    plugin = config.pluginmanager.get_plugin("lfplugin")
    lastfailed = getattr(plugin, "lastfailed", None) or {}
    failed = sum(1 for nodeid in lastfailed if episode_id_from_nodeid(str(nodeid)))
    return failed or None


def subset_text(failed: int, judged: int) -> str:
    return (
        f"--lf played only the {failed} episode(s) that failed last time, without "
        f"--openenv-resume: the gate judged these {judged}, not the whole dataset, so it "
        "cannot pass the run (run with --openenv-resume to judge every episode of the folder)"
    )
