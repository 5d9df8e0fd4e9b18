"""Stop handing out episodes under xdist: take back what the workers have queued.

Setting xdist's ``shouldstop`` shuts the workers down, but each worker first plays
every item already sent to it, and ``--dist load`` sends a quarter of the run up
front. After a write error those episodes are played in vain (hundreds, in a big
run). xdist's own ``steal`` command takes queued items back from a worker (the
``worksteal`` scheduler uses it); the default scheduler cannot account for
stolen items, so it is taught to here, then every queued item is stolen, one
command per item so one that has started already does not stop the rest.
A worker then plays at most the item it is on and the one it has picked up next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cancel_queued_items(dsession: Any) -> int:
    """Ask each worker to drop its queued items; how many were asked for."""
    sched = getattr(dsession, "sched", None)
    if type(sched).__name__ != "LoadScheduling":
        return 0  # other schedulers keep their own books: leave them to xdist's shutdown
    node2pending: dict[Any, list[int]] = getattr(sched, "node2pending", {})
    pending: list[int] | None = getattr(sched, "pending", None)
    if pending is not None:
        pending.clear()  # never sent: never will be

    def unscheduled(node: Any, indices: Sequence[int]) -> None:
        queue = node2pending.get(node, [])
        for index in indices:
            if index in queue:
                queue.remove(index)

    sched.remove_pending_tests_from_node = unscheduled
    asked = 0
    for node, queue in list(node2pending.items()):
        if getattr(node, "shutting_down", False):
            continue
        for index in queue[1:]:  # queue[0] is the item the worker is on
            node.send_steal([index])
            asked += 1
    return asked
