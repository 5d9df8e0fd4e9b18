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

import itertools
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

    def following(
        self, item: pytest.Item, *, limit: int, queued: bool, start: int = 0
    ) -> list[pytest.Item]:
        """The items this worker runs after ``item`` at positions ``start`` up to ``limit``
        (0: the next one): with ``queued`` the rest of its queue too (only where the
        controller never takes them back)."""
        if self._broken:
            return []
        try:
            interactor = self._find()
            items = interactor.session.items
            if items[interactor.item_index] is not item:
                return []  # not run by the worker loop we know; stay safe
            following = interactor.nextitem_index
            if not isinstance(following, int):
                return []
            indices: list[Any] = [following] if start == 0 and limit > 0 else []
            if queued and limit > 1:
                with interactor.torun.lock() as waiting:
                    # a slice of the deque in C: a worker asks at every item, its queue
                    # a window long
                    indices += itertools.islice(waiting, max(0, start - 1), limit - 1)
            kept: list[pytest.Item] = []
            for index in indices:
                if not isinstance(index, int):
                    break  # the shutdown marker: nothing after it runs
                kept.append(items[index])
            return kept
        except (AttributeError, IndexError, TypeError):
            self._broken = True
            warnings.warn(pytest.PytestWarning(WARNING), stacklevel=2)
            return []
