"""The end of a run, readable at a glance (controller only).

An eval with hundreds of failed episodes used to bury the openenv summary under
hundreds of full failure reports. Here:

- episode failures and errors beyond the first ``--openenv-failure-reports`` (default 3)
  are held back from pytest's FAILURES/ERRORS sections and from its short test summary,
  and get one line each instead, in pytest's own ``FAILED nodeid - message`` form, with a
  link to the episode's transcript in ``report.html`` (``file://...#ep-000123``);
- when a gate passes, the episodes it accepted are counted under their own category in
  pytest's last line (``24 passed, 6 gated``, green) instead of a red ``6 failed`` over
  exit code 0. JUnit XML is aligned separately (``report/junit.py``);
- and, the run being decided, those episodes get no report of their own at all: one
  section counts them per test with their first few ids and points at ``report.html`` and
  ``failures.jsonl`` (``-v``, or ``--openenv-failure-reports`` given, shows them again).

Reports are only moved between the terminal reporter's lists for the summary, never
changed: every one is back (or under ``gated``) before pytest counts them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Any

import pytest

from ..episode.outcome import outcome_of

#: the category of gate-accepted episodes in pytest's last line
GATED = "gated"
#: where pytest files failed and errored reports
OUTCOME_KEYS = ("error", "failed")
LINE_CHARS = 160
_ERROR_PREFIX = re.compile(r"^E\s+")


def is_episode_verdict(report: Any) -> bool:
    return outcome_of(report) is not None and report.when != "teardown"


def episode_id(report: Any) -> str:
    """The episode id of a report ``is_episode_verdict`` picked."""
    outcome = outcome_of(report)
    assert outcome is not None
    return outcome.episode_id


def one_line(report: Any) -> str:
    """The story of a failed episode in one line: its figures and why it did not pass."""
    outcome = outcome_of(report)
    text = str(getattr(report, "longrepr", "") or "")
    # an assertion's story comes as pytest's "E   ..." lines
    lines = [_ERROR_PREFIX.sub("", line).strip() for line in text.splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith(("reason:", "episode error:"))), "")
    if outcome is not None and outcome.has_figures:
        # the verdict's own words (``Episode.status_line``), as the item status line shows them
        summary = outcome.status_detail()
        why = reason.removeprefix("reason: ")
        # the status line ends with the outcome word the reason starts with: say it once
        word = outcome.outcome
        if word and summary.endswith(f" {word}") and why.startswith(f"{word}: "):
            why = why[len(word) + 2 :]
        message = f"{summary}: {why}" if why else summary
    else:
        message = reason or (lines[-1] if lines else report.outcome)
    return message if len(message) <= LINE_CHARS else message[: LINE_CHARS - 1] + "…"


class EndOfRun:
    """Registered on the controller; reads the run through two narrow callables.

    ``link(episode_id, nodeid)``: the episode's address in report.html, or None when
    there is no report; ``excused()``: node ids a passing gate accepted, or None.
    """

    def __init__(
        self,
        *,
        full_reports: int | None,
        link: Callable[[str, str], str | None],
        excused: Callable[[], set[str] | None],
        quiet_when_gated: bool = True,
        failures_file: str | None = None,
    ) -> None:
        self.full_reports = full_reports
        self.link = link
        self.excused = excused
        #: a passing gate's accepted episodes are only counted (not ``-v``, and no
        #: ``--openenv-failure-reports`` given)
        self.quiet_when_gated = quiet_when_gated
        #: failures.jsonl, where the accepted episodes' rows are
        self.failures_file = failures_file
        self._held: list[tuple[str, Any]] = []
        #: the gate-accepted episodes held back, only counted (``gated_section``)
        self._gated: list[tuple[str, Any]] = []

    def _holds_back(self, reporter: Any) -> bool:
        if self.full_reports is None or getattr(reporter, "no_summary", False):
            return False
        return reporter.config.getoption("tbstyle", "auto") != "no"

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> Generator[None, None, None]:
        stats: dict[str, list[Any]] = terminalreporter.stats
        if self._quiet(terminalreporter):
            self._gated = self._hold_back_excused(stats)
        if self._holds_back(terminalreporter):
            self._held = self._hold_back(stats)
        try:
            return (yield)
        finally:
            for key, report in [*self._gated, *self._held]:
                stats.setdefault(key, []).append(report)
            self._held, self._gated = [], []
            self._count_gated(terminalreporter)

    def _quiet(self, reporter: Any) -> bool:
        if not self.quiet_when_gated or getattr(reporter, "no_summary", False):
            return False
        return reporter.config.get_verbosity() <= 0 and bool(self.excused())

    def _hold_back_excused(self, stats: dict[str, list[Any]]) -> list[tuple[str, Any]]:
        excused = self.excused() or set()
        held: list[tuple[str, Any]] = []
        for key in OUTCOME_KEYS:
            reports = stats.get(key)
            if not reports:
                continue
            stay = []
            for report in reports:
                if is_episode_verdict(report) and report.nodeid in excused:
                    held.append((key, report))
                else:
                    stay.append(report)
            if stay:
                stats[key] = stay
            else:
                del stats[key]
        return held

    @pytest.hookimpl(tryfirst=True, specname="pytest_terminal_summary")
    def pytest_terminal_summary_gated(self, terminalreporter: Any) -> None:
        """The episodes a passing gate accepted: counted per test, a few ids, where to look."""
        if not self._gated:
            return
        for line in gated_section(self._gated, self.link, self.failures_file):
            if line.startswith("-- "):
                terminalreporter.section(line[3:], sep="-", bold=True)
            else:
                terminalreporter.write_line(line)

    @pytest.hookimpl(tryfirst=True, specname="pytest_terminal_summary")
    def pytest_terminal_summary_held_back(self, terminalreporter: Any) -> None:
        """Right after pytest's FAILURES section: one line per episode held back."""
        if not self._held:
            return
        shown = self.full_reports or 0
        terminalreporter.section(
            f"{len(self._held)} more failed or errored episodes "
            f"(first {shown} in full above; --openenv-failure-reports=all shows every one)",
            sep="-",
            bold=True,
        )
        # by episode id: under xdist the order they finished in is no order at all
        for key, report in sorted(self._held, key=lambda held: held[1].nodeid):
            word = "ERROR" if key == "error" else "FAILED"
            line = f"{word} {report.nodeid} - {one_line(report)}"
            address = self.link(episode_id(report), report.nodeid)
            terminalreporter.write_line(line + (f"  {address}" if address else ""))

    def _hold_back(self, stats: dict[str, list[Any]]) -> list[tuple[str, Any]]:
        kept = 0
        held: list[tuple[str, Any]] = []
        for key in OUTCOME_KEYS:
            reports = stats.get(key)
            if not reports:
                continue
            remaining = []
            for report in reports:
                if is_episode_verdict(report):
                    if kept < (self.full_reports or 0):
                        kept += 1
                    else:
                        held.append((key, report))
                        continue
                remaining.append(report)
            if remaining:
                stats[key] = remaining
            else:
                del stats[key]
        return held

    def _count_gated(self, reporter: Any) -> None:
        excused = self.excused()
        if not excused:
            return
        stats: dict[str, list[Any]] = reporter.stats
        gated: list[Any] = []
        for key in OUTCOME_KEYS:
            reports = stats.get(key)
            if not reports:
                continue
            stay = [r for r in reports if not (is_episode_verdict(r) and r.nodeid in excused)]
            gated += [r for r in reports if is_episode_verdict(r) and r.nodeid in excused]
            if stay:
                stats[key] = stay
            else:
                del stats[key]
        if gated:
            stats.setdefault(GATED, []).extend(gated)
            show_gated_in_green(reporter)


#: ids shown per test in the gated section
GATED_IDS_SHOWN = 5


def gated_section(
    gated: list[tuple[str, Any]],
    link: Callable[[str, str], str | None],
    failures_file: str | None,
) -> list[str]:
    """The lines that stand for the gate-accepted episodes' reports (a ``-- `` line is the
    section's title)."""
    by_test: dict[tuple[str, str], list[str]] = {}
    for key, report in gated:
        test = report.nodeid.rpartition("[")[0] or report.nodeid
        word = "errored" if key == "error" else "failed"
        by_test.setdefault((test, word), []).append(episode_id(report))
    lines = [
        f"-- {len(gated)} episode failure(s) the gate accepted",
        "(their reports are left out: -v or --openenv-failure-reports=N shows them)",
    ]
    for (test, word), ids in by_test.items():
        ids.sort()  # the first few by id, not by the order they finished in
        shown = ", ".join(ids[:GATED_IDS_SHOWN])
        more = f" and {len(ids) - GATED_IDS_SHOWN} more" if len(ids) > GATED_IDS_SHOWN else ""
        lines.append(f"{test}: {len(ids)} {word} ({shown}{more})")
    first = gated[0][1]
    address = link(episode_id(first), first.nodeid)
    where = []
    if address:
        where.append(f"transcripts: {address.partition('#')[0]}")
    if failures_file:
        where.append(f"rows: {failures_file}")
    if where:
        lines.append("    ".join(where))
    return lines


def show_gated_in_green(reporter: Any) -> None:
    """pytest colours a category it does not know yellow, and the whole line with it.

    A gate-accepted episode is the outcome the gate asked for, so ``gated`` is green and
    does not turn the line yellow on its own. Uses the terminal reporter's colour table
    and main-colour rule (no public API exists for a plugin's own category); on a pytest
    without them the category still counts, in yellow.
    """
    try:
        from _pytest import terminal
    except ImportError:  # pragma: no cover
        return
    colours = getattr(terminal, "_color_for_type", None)
    if isinstance(colours, dict):
        colours.setdefault(GATED, "green")
    determine = getattr(reporter, "_determine_main_color", None)
    known = getattr(terminal, "KNOWN_TYPES", ())
    if determine is None or getattr(determine, "openenv_gated", False):
        return

    def main_colour(unknown_type_seen: bool) -> str:
        others = [key for key in reporter.stats if key and key not in known and key != GATED]
        return determine(bool(others))

    main_colour.openenv_gated = True  # type: ignore[attr-defined]
    reporter._determine_main_color = main_colour
    reporter._main_color = None
