"""Keep the controller's memory flat over long runs (controller only).

pytest's terminal reporter keeps every report of the session in its ``stats``
(for the summary line and ``--durations``), three per episode. Reports that
arrive from xdist workers are freshly decoded, so each carries its own copy of
the same strings (node id, location, outcome, worker id, keyword names). At
20,000 episodes those copies, not the episodes, dominate the controller's memory.

``ReportSlimmer`` runs after every other ``pytest_runtest_logreport`` hook has
seen the report and, for episode reports that passed, shares or drops what
nothing reads later. Failed and errored reports are left whole: the short test
summary prints them at the end.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

#: our own per-report fields that only the live report line needs
DROP_WHEN_PASSED = ("openenv_brief",)


def _interned(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


class ReportSlimmer:
    def __init__(self) -> None:
        # node id -> (node id, location, episode id) of items whose teardown has not
        # arrived: one entry per item in flight, so bounded by the number of workers
        self._in_flight: dict[str, tuple[str, Any, Any]] = {}

    def slim(self, report: pytest.TestReport) -> None:
        shared = self._in_flight.get(report.nodeid)
        if shared is None:
            location = tuple(_interned(part) for part in report.location)
            episode_id = getattr(report, "openenv_episode_id", None)
            shared = (report.nodeid, location, episode_id)
            self._in_flight[report.nodeid] = shared
        report.nodeid, report.location = shared[0], shared[1]  # type: ignore[assignment]
        if shared[2] is not None:
            report.openenv_episode_id = shared[2]  # type: ignore[attr-defined]
        if report.when == "teardown":
            self._in_flight.pop(report.nodeid, None)
        if not report.passed:
            return
        fields = vars(report)
        for name, value in fields.items():
            if type(value) is str and name != "nodeid":
                fields[name] = sys.intern(value)  # "passed", "setup", "gw3", run uid, ...
        report.keywords = {}  # per-item names nothing reads after the live hooks
        for name in DROP_WHEN_PASSED:
            fields.pop(name, None)
