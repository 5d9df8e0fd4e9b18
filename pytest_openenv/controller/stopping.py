"""Ending a run early: one way, whatever asked for it.

Three things stop a run before its last item: pytest's ``-x`` / ``--maxfail`` (xdist
sets its ``shouldstop``), a write error on the controller (episodes that cannot be
saved are waste) and a run budget reached (``budget.py``): the last two through
``RunStop.stop``. Setting xdist's flag shuts the workers down,
but each first plays every item already sent to it, and a queue may hold hundreds.
So a scheduler that can take its queued items back (xdist's ``steal`` command)
implements ``TakesBackQueued``, and is asked to at either kind of stop. Schedulers
that do not (xdist's own, other than ``--dist load``) keep their own books: xdist's
shutdown ends them after their queues.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pytest


@runtime_checkable
class TakesBackQueued(Protocol):
    """A scheduler that can take back the items it queued on workers."""

    def take_back_queued(self) -> int:
        """Ask every worker to give back its queued items that have not started; how many
        were asked for. Called once the run should stop; nothing is handed out after it."""
        ...


def xdist_should_stop(config: pytest.Config) -> bool:
    """Whether xdist's controller loop is stopping (``-x``, ``--maxfail``, or ``RunStop``)."""
    dsession = config.pluginmanager.getplugin("dsession")
    return bool(getattr(dsession, "shouldstop", False))


class RunStop:
    """Stops the run after the items in flight, with or without xdist."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.session: pytest.Session | None = None
        #: the scheduler this plugin made for xdist, if it made one
        self.scheduler: object | None = None

    def stop(self, reason: str) -> None:
        if self.session is not None:
            self.session.shouldstop = reason
        # xdist's controller loop reads its own flag, not the session's
        dsession = self.config.pluginmanager.getplugin("dsession")
        if dsession is None or getattr(dsession, "shouldstop", False):
            return
        dsession.shouldstop = reason
        if isinstance(self.scheduler, TakesBackQueued):
            self.scheduler.take_back_queued()
