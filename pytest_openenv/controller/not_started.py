"""Episodes a run budget kept from starting, reported to pytest as skipped (controller).

A budget stops the run through ``RunStop``: the items left never run, so no report of
theirs reaches pytest. The plugin's summary counts them as skipped; this makes pytest's
own line (``7 passed, 13 skipped``), ``-rs`` and JUnit XML (``skipped="13"``) say the
same, with the reason, by sending each one a skipped setup report and an empty
teardown, as a skip marker would have. They carry no episode id: the run's accounts
never count them as played.
"""

from __future__ import annotations

import pytest


def location_of(nodeid: str) -> tuple[str, int | None, str]:
    """A node id's (file, line, name), as far as the id tells (xdist sends only ids)."""
    path, _, name = nodeid.partition("::")
    return path, None, name.replace("::", ".") or nodeid


def report_not_started(
    config: pytest.Config,
    nodeids: list[str],
    locations: dict[str, tuple[str, int | None, str]],
    reason: str,
) -> None:
    """One skipped item per node id, through pytest's own report hooks."""
    hook = config.hook
    for nodeid in nodeids:
        location = locations.get(nodeid) or location_of(nodeid)
        path, line, _ = location
        hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
        skipped = pytest.TestReport(
            nodeid, location, {}, "skipped", (path, line, f"Skipped: {reason}"), "setup"
        )
        hook.pytest_runtest_logreport(report=skipped)
        hook.pytest_runtest_logreport(
            report=pytest.TestReport(nodeid, location, {}, "passed", None, "teardown")
        )
        hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
