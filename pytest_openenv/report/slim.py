"""Keep the controller's memory flat over long runs (controller only).

pytest's terminal reporter keeps every report of the session in its ``stats``
(for the summary line and ``--durations``), three per episode, and xdist keeps
each worker's list of collected node ids. Reports and ids that arrive from
workers are freshly decoded, so each carries its own copy of the same strings
and parsed node id. At 20,000 episodes those copies, not the episodes, dominate
the controller's memory. ``ReportSlimmer`` shares what is equal and drops what
nothing reads once every hook has seen a passed report. Failed and errored
reports keep everything: the short test summary prints them at the end.
"""

from __future__ import annotations

import sys
from types import MappingProxyType
from typing import Any

import pytest

from ..episode.outcome import OUTCOME_ATTR, outcome_of, put_outcome

#: shared stand-ins for the per-report empty containers of passed reports
NO_KEYWORDS: MappingProxyType[str, Any] = MappingProxyType({})
NOTHING: tuple[()] = ()


def _interned(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


def phase_reports(config: pytest.Config) -> list[Any] | None:
    """The terminal reporter's list of passed setup/teardown reports, if nothing reads it.

    pytest files those under the category ``""``: they are never counted or shown,
    except by ``--durations``, ``console_output_style=times`` and ``-rP`` (captured
    teardown output). Without those, keeping them only costs memory.
    """
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or config.getoption("durations", None) is not None:
        return None
    if config.getini("console_output_style") == "times":
        return None
    stats: dict[str, list[Any]] = reporter.stats
    return stats.setdefault("", [])


class ReportSlimmer:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # node id -> (parsed id, location, episode id) of items whose teardown has not
        # arrived yet: one entry per item in flight, so bounded by the number of workers
        self._in_flight: dict[str, tuple[Any, Any, Any]] = {}
        self._phase_reports: list[Any] | bool | None = False  # False: not looked up yet

    def before_rebuild(self, data: dict[str, Any]) -> None:
        """xdist: before a worker's serialized report becomes a ``TestReport`` (controller).

        Its item's earlier reports already hold the node id, parsed, and the location:
        the rebuilt report gets those objects instead of copies of its own. (``TestReport``
        takes a parsed node id where it takes the string.)
        """
        wire = data.get(OUTCOME_ATTR)
        if not isinstance(wire, dict) or data.get("$report_type") != "TestReport":
            return
        shared = self._in_flight.get(data["nodeid"])
        if shared is not None:
            data["nodeid"], data["location"], wire["episode_id"] = shared

    def after_rebuild(self, report: Any) -> None:
        """xdist: the rebuilt report; the first of its item lends its fields to the others."""
        outcome = outcome_of(report)
        if outcome is None or not isinstance(report, pytest.TestReport):
            return
        nodeid = report.nodeid
        if report.when == "teardown":
            self._in_flight.pop(nodeid, None)  # the item's last report
        elif nodeid not in self._in_flight:
            report.location = tuple(_interned(part) for part in report.location)  # type: ignore[assignment]
            # pytest >= 9.2 keeps the node id parsed (``TestReport.id``); older ones a string
            self._in_flight[nodeid] = (
                getattr(report, "id", nodeid),
                report.location,
                sys.intern(outcome.episode_id),
            )

    def slim(self, report: pytest.TestReport) -> None:
        """After every other hook has seen it: drop what nothing reads from a passed report."""
        if not report.passed:
            return
        fields = vars(report)
        if report.when in ("setup", "teardown") and not report.sections:
            if self._phase_reports is False:
                self._phase_reports = phase_reports(self.config)
            shown = self._phase_reports
            if isinstance(shown, list) and shown and shown[-1] is report:
                shown.pop()  # filed by the terminal reporter just before this hook
                return
        for name, value in fields.items():
            if type(value) is str:
                fields[name] = sys.intern(value)  # "passed", "setup", "gw3", run uid, ...
        report.keywords = NO_KEYWORDS
        for name in ("sections", "user_properties"):
            if fields.get(name) == []:
                fields[name] = NOTHING
        outcome = outcome_of(report)
        if outcome is not None and outcome.has_figures:  # only the live report line read them
            put_outcome(report, outcome.slimmed())

    @staticmethod
    def share_collection(ids: list[str]) -> None:
        """xdist keeps every worker's copy of the collected ids: make them one copy."""
        ids[:] = [sys.intern(nodeid) for nodeid in ids]
