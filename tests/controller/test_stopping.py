"""``RunStop``: one way to end a run early, with or without xdist."""

from __future__ import annotations

import pytest

from pytest_openenv.controller.stopping import RunStop, TakesBackQueued


class Session:
    shouldstop: bool | str = False


class Scheduler:
    def __init__(self) -> None:
        self.asked = 0

    def take_back_queued(self) -> int:
        self.asked += 1
        return 3


class DSession:
    shouldstop: bool | str = False


def test_without_xdist_the_session_stops_after_the_item_in_flight(
    pytester: pytest.Pytester,
) -> None:
    stopper = RunStop(pytester.parseconfig())
    stopper.session = Session()  # type: ignore[assignment]
    stopper.scheduler = Scheduler()
    stopper.stop("openenv: cannot write")
    assert stopper.session.shouldstop == "openenv: cannot write"
    assert stopper.scheduler.asked == 0  # no xdist controller: nothing was queued


def test_under_xdist_the_scheduler_takes_its_queues_back_once(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    dsession = DSession()
    config.pluginmanager.register(dsession, "dsession")
    stopper = RunStop(config)
    scheduler = stopper.scheduler = Scheduler()
    assert isinstance(scheduler, TakesBackQueued)
    stopper.stop("openenv: cannot write")
    stopper.stop("openenv: cannot write again")
    assert dsession.shouldstop == "openenv: cannot write" and scheduler.asked == 1


def test_a_scheduler_that_cannot_take_back_is_left_to_xdist(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    dsession = DSession()
    config.pluginmanager.register(dsession, "dsession")
    stopper = RunStop(config)
    stopper.scheduler = object()  # e.g. xdist's own worksteal scheduler
    stopper.stop("openenv: cannot write")
    assert dsession.shouldstop == "openenv: cannot write"
