"""Controller side: hand each xdist worker enough episode items to keep C episodes in flight.

A worker runs ahead only over the items xdist has already handed it
(``worker/runahead.py``). xdist's ``LoadScheduling`` keeps a node at about two pending
items once tests take 0.1 s or more ("long-running tests"), so with ``-n W
--openenv-concurrency C`` a worker would see two items and keep two episodes in
flight instead of C. ``EpisodeLoadScheduling`` keeps the same ``--dist load``
rules (every item runs once; a dead node's pending items go back to the pool and
the one it was running is reported as crashed, by xdist) but tops each node up to
its run-ahead window (``WINDOW_FACTOR * C`` items, plus C so refills come in
batches), never taking more than an even share of what is still unassigned, so the
last items still spread over every node.

When the run should stop, xdist only appends a shutdown marker behind a node's
queue, and each worker would go on through its queue first. So this scheduler
takes the queued items back (``stopping.TakesBackQueued``) with xdist's own
``steal`` command (what ``--dist worksteal`` uses). Asked at ``-x`` / ``--maxfail``
when its queues are the long ones (episodes run ahead), and at a write error in
any case: a stopped session reports what ran, as without xdist.

Used for every ``--dist load`` run. Topping up applies with more than one episode
in flight per worker and a collection holding episode items; otherwise it
schedules as xdist's own ``LoadScheduling``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling

from ..config.convert import WINDOW_FACTOR, concurrency_ceiling
from .accounts import episode_id_from_nodeid
from .stopping import xdist_should_stop

#: items a worker has already popped off its queue (the running one and the next)
POPPED = 2
#: xdist --dist modes whose scheduler takes back the items it sent to a worker only to
#: stop the run (worksteal rebalances with them): workers may run those ahead
KEEPS_QUEUED_ITEMS = ("load", "loadscope", "loadfile", "loadgroup", "each")


def keeps_queued_items(dist: str | None) -> bool:
    """Whether a worker of this ``--dist`` mode may count on running what it was sent."""
    return dist in KEEPS_QUEUED_ITEMS


def wanted(config: pytest.Config) -> bool:
    """Whether a run gets ``EpisodeLoadScheduling``: ``--dist load``."""
    return config.getoption("dist", None) == "load"


class EpisodeLoadScheduling(LoadScheduling):
    """``--dist load`` with each node's queue kept at its worker's run-ahead window."""

    def __init__(self, config: pytest.Config, log: Any = None, *, concurrency: int) -> None:
        super().__init__(config, log)
        window = WINDOW_FACTOR * concurrency
        #: a node gets more items when it holds fewer than this ...
        self.low = window
        #: ... up to this many
        self.high = window + concurrency
        #: episodes run ahead of their items: queues are kept a window long
        self.runs_ahead = concurrency > 1
        #: ... and the collection holds episode items (decided when it arrives)
        self.active = False
        #: the run is stopping: queues are being taken back, nothing is handed out
        self.taking_back = False
        self._steal_in_flight: set[Any] = set()
        self._steal_misses: dict[Any, int] = {}

    def schedule(self) -> None:
        first = self.collection is None
        super().schedule()
        if first and self.collection and self.runs_ahead:
            self.active = any(episode_id_from_nodeid(nodeid) for nodeid in self.collection)
            if self.active:
                for node in self.nodes:
                    self._top_up(node)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if self.taking_back or (self.active and xdist_should_stop(self.config)):
            self.take_back_queued()
            return
        if not self.active:
            super().check_schedule(node, duration)
            return
        if node.shutting_down:
            return
        if self.pending:
            self._top_up(node)
        else:
            node.shutdown()

    def _top_up(self, node: Any) -> None:
        have = len(self.node2pending[node])
        if have >= self.low or not self.pending or node.shutting_down:
            return
        # an even share of all work not yet done, so the last items spread over every node
        outstanding = len(self.pending) + sum(len(p) for p in self.node2pending.values())
        share = math.ceil(outstanding / max(1, len(self.node2pending)))
        count = min(self.high, share) - have
        if self.maxschedchunk:
            count = min(count, self.maxschedchunk)
        if count > 0:
            self._send_tests(node, count)

    # -- stopping: the queued items are not run --------------------------------
    def take_back_queued(self) -> int:
        """``stopping.TakesBackQueued``: ask each node for all it holds but what it popped.

        Called again at every later completion until each node has given its queue
        back. One request per node, for its whole queue: sent per item, the requests
        would race the worker through the head of its queue.
        """
        self.taking_back = True
        self.pending.clear()  # never sent: never will be
        return sum(self._take_back(node) for node in self.nodes)

    def _take_back(self, node: Any) -> int:
        if node in self._steal_in_flight:
            return 0
        queued = self.node2pending.get(node, [])[POPPED + self._steal_misses.get(node, 0) :]
        if not queued:
            return 0
        try:
            node.send_steal(queued)
        except OSError:  # its channel is closed: the worker is gone, nothing to take
            return 0
        self._steal_in_flight.add(node)
        return len(queued)

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        """The worker's answer to ``steal``: those items left its queue and will not run.

        It gives back all or nothing; nothing means it had already started one of
        them, so the next attempt leaves one more item at the head of the queue.
        """
        self._steal_in_flight.discard(node)
        if indices:
            taken = set(indices)
            if node in self.node2pending:
                self.node2pending[node] = [i for i in self.node2pending[node] if i not in taken]
        else:
            self._steal_misses[node] = self._steal_misses.get(node, 0) + 1


def make_scheduler(config: pytest.Config, log: Any, concurrency: Any) -> LoadScheduling | None:
    """The scheduler for ``pytest_xdist_make_scheduler``, or None for xdist's default."""
    if not wanted(config):
        return None
    return EpisodeLoadScheduling(config, log, concurrency=concurrency_ceiling(concurrency))
