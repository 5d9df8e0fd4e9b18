"""The items the controller has handed this xdist worker and it has not run yet.

Run-ahead plays the episodes of items this process is certain to run next. On an
xdist worker those are the items in its queue, which xdist keeps on the worker's
``WorkerInteractor`` (``nextitem_index``, the item it picked up next, and ``torun``,
the rest) and offers no public way to read: the worker sees only the next item
(``nextitem`` of ``pytest_runtest_protocol``), which would cap run-ahead at two
episodes. So this module reads them, and is the only one that touches xdist's worker
internals; ``tests/worker/test_xdist_queue.py`` fails if they change. If they do,
nothing runs ahead (each item plays its own episode), and a warning says why.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

WARNING = (
    "pytest-xdist's worker no longer exposes its queue of items as this plugin expects "
    "(WorkerInteractor.torun / nextitem_index): --openenv-concurrency runs no episode "
    "ahead on xdist workers, so each worker keeps one episode in flight"
)


class WorkerQueue:
    """This worker's queued items, in the order it will run them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._interactor: Any = None
        self._broken = False

    def _find(self) -> Any:
        if self._interactor is None:
            for plugin in self.config.pluginmanager.get_plugins():
                # xdist runs its worker module as execnet's __channelexec__, so the class
                # cannot be imported to compare with: known by name and attributes
                if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
                    self._interactor = plugin
                    break
        return self._interactor

    def following(self, item: pytest.Item, *, limit: int, queued: bool) -> list[pytest.Item]:
        """Up to ``limit`` items this worker runs after ``item``: the next one, and with
        ``queued`` the rest of its queue (only where the controller never takes them back)."""
        if self._broken:
            return []
        try:
            interactor = self._find()
            items = interactor.session.items
            if items[interactor.item_index] is not item:
                return []  # not run by the worker loop we know; stay safe
            indices: list[int] = []
            following = interactor.nextitem_index
            if isinstance(following, int):
                indices.append(following)
                if queued:
                    with interactor.torun.lock() as waiting:
                        for index in waiting:
                            if not isinstance(index, int) or len(indices) >= limit:
                                break  # the shutdown marker: nothing after it runs
                            indices.append(index)
            return [items[i] for i in indices]
        except (AttributeError, IndexError, TypeError):
            self._broken = True
            warnings.warn(pytest.PytestWarning(WARNING), stacklevel=2)
            return []
