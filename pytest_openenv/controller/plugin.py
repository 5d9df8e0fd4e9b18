"""Controller side: the plugin of the process that sees every report.

The xdist controller, or the single pytest process with ``-n 0``. It is the only
writer of the output folder. ``ControllerPlugin`` holds the run's parts, each with
one job, and its hooks hand each event to them:

* ``OutputFolder`` (``output.py``): checked at start, claimed once episode tests are
  collected (ownership, lock, resume identity), rows appended, released at the end;
* ``Accounts`` (``accounts.py``): every report in the ledger's terms (``report/ledger.py``:
  one entry per episode, every figure a view of it);
* ``ReportSlimmer`` (``report/slim.py``): the controller's memory flat over long runs;
* ``SessionEnd`` (``finish.py``): gate, JUnit, final files, report, card, Hub, summaries;
* ``RunStop`` (``stopping.py``): a write error ends the run after the items in flight;
* ``RunBudget`` (``budget.py``): a run budget reached ends it the same way;
* what a person sees: ``LiveStatus`` (``progress.py``), the live line, and
  ``EndOfRun`` (``terminal_end.py``), a short end of run, a plugin of its own.

A run that collects no episode test writes nothing and prints nothing: the folder is
claimed at collection and the rest activates at the first episode report. The xdist
hooks live in ``XdistController`` (``xdist.py``), registered only with xdist.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config.options import given_as
from ..config.shard import SHARD_COLLECTION
from ..dataset.hub import HubPublisher
from ..dataset.identity import RESUME_REFUSED, USAGE_REFUSED
from ..episode.outcome import outcome_from_wire, outcome_of
from ..report.gates import GateConfig
from ..report.ledger import Ledger
from ..report.slim import ReportSlimmer
from ..util.secrets import KnownSecrets
from ..util.signals import InterruptsHeld, TermAsInterrupt, drop_entries_without_a_line
from .accounts import Accounts, only_marks_reported
from .budget import RunBudget
from .finish import SessionEnd
from .metadata import RunMetadata
from .output import OutputFolder, preload_earlier_rows
from .progress import LiveStatus, gate_so_far
from .stopping import RunStop
from .terminal_end import EndOfRun

if TYPE_CHECKING:
    from ..episode.service import EpisodeService
    from .template import TemplateCheck


class ControllerPlugin:
    name = "openenv-controller"

    def __init__(
        self,
        config: pytest.Config,
        service: EpisodeService,
        *,
        template: TemplateCheck | None = None,
    ) -> None:
        """Check what the run needs before any episode; a problem is a usage error.

        ``template``: what ``--openenv-chat-template`` found before the run.
        """
        settings = service.settings
        if settings.output.resume_failed and not settings.output.resume:
            raise pytest.UsageError(
                "--openenv-resume-failed plays the failed episodes of an earlier run again: "
                "it needs --openenv-resume"
            )
        self.config = config
        self.settings = settings
        self.service = service
        self.secrets = KnownSecrets.from_settings(settings)
        #: what the summary adds at its end (a lock taken over, a card kept, JUnit left)
        notes: list[str] = []
        self.output = OutputFolder(config, settings, self.secrets, notes)
        # publishing: a missing Hub token is a usage error before any episode
        publisher = HubPublisher.from_settings(settings)
        # evaluation: gate config is read here so a bad baseline is a usage error
        gate = GateConfig.from_settings(settings, invocation_dir=Path(config.invocation_params.dir))
        self.run = RunMetadata(settings, service, gate, template)
        ledger = Ledger()
        if settings.output.resume:
            # the earlier run's rows wait in the ledger, counted once their item is reached
            preload_earlier_rows(settings, ledger)
        self.accounts = Accounts(settings, service, ledger)
        # what the run may spend; a cost budget without prices is a usage error
        self.budget = RunBudget(settings)
        self.slimmer = ReportSlimmer(config)
        self.end = SessionEnd(
            config,
            service,
            output=self.output,
            accounts=self.accounts,
            run=self.run,
            publisher=publisher,
            secrets=self.secrets,
            notes=notes,
            budget=self.budget,
        )
        self.stopper = RunStop(config)
        #: why a worker stopped the run (its response cache cannot be written), once
        self.halted: str | None = None
        self.sigterm = TermAsInterrupt()
        self.live: LiveStatus | None = None
        #: the usage error a collection report carried (the run ends with it)
        self.refused: str | None = None
        self.collected: list[str] = []
        config.pluginmanager.register(
            EndOfRun(
                full_reports=settings.output.failure_reports,
                link=self.end.report_link,
                excused=self.end.excused_by_gate,
                quiet_when_gated=given_as(config, "failure-reports") is None,
                failures_file=str(settings.output.folder / "failures.jsonl"),
            ),
            "openenv-end-of-run",
        )

    @classmethod
    def start(
        cls, config: pytest.Config, service: EpisodeService, *, template: TemplateCheck | None
    ) -> ControllerPlugin:
        plugin = cls(config, service, template=template)
        config.pluginmanager.register(plugin, cls.name)
        return plugin

    def claim_output(self, nodeids: list[str]) -> None:
        """Once the collection is known: claim the folder if it holds episode tests."""
        from .accounts import dist_each_problem, episode_id_from_nodeid

        if self.refused is not None:
            return  # pytest finishes a collection even when it raised: write nothing
        problem = dist_each_problem(nodeids, self.config.getoption("dist", None))
        if problem is not None:
            raise pytest.UsageError(problem)
        if self.accounts.expect(nodeids):
            #: the episode items, for those a budget keeps from starting (``not_started``)
            self.collected = [nodeid for nodeid in nodeids if episode_id_from_nodeid(nodeid)]
            self.output.claim(self.run)
            # a cancelled CI job or `docker stop` finishes the files as Ctrl-C does
            self.sigterm.install()

    def stop(self, reason: str) -> None:
        self.stopper.stop(reason)

    def check_budget(self) -> None:
        """Stop the run once its spend reaches a budget, unless no episode is left to run
        (a finished run is not an interrupted one)."""
        accounts = self.accounts
        totals, expected = accounts.ledger.totals, accounts.expected
        if expected is not None and totals.total >= expected:
            return
        reason = self.budget.reached(accounts.spent_tokens(), accounts.spent_usd())
        if reason is not None:
            self.stop(f"openenv: {reason}")

    def show_progress(self) -> None:
        live, accounts, gate = self.live, self.accounts, self.run.gate
        if live is not None and accounts.ledger.totals.total and live.due():
            tally = accounts.live_tally()
            live.update(
                tally,
                accounts.expected,
                lambda: gate_so_far(gate, tally, accounts.passk),
                costly=gate.active and gate.metric != "pass@1",
            )

    # -- hooks -----------------------------------------------------------------
    def pytest_report_header(self) -> list[str]:
        from ..report.gates import default_gated_note

        note = default_gated_note(self.settings)
        lines = [f"openenv: {note}"] if note else []
        shard = self.settings.run.shard
        if shard is not None:
            lines.append(
                f"openenv: plays {shard.described()}, writes {self.settings.output.folder}"
            )
        return lines

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # the run's wall time starts here, past the checks made before any episode
        self.accounts.clock.started = time.monotonic()
        self.stopper.session = session
        from .subset import last_failed_episodes

        self.end.last_failed = last_failed_episodes(self.config, self.settings)
        self.live = LiveStatus.for_run(self.config, self.settings.output.progress)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # -n 0: this process collected the items itself (xdist: XdistController)
        self.claim_output([item.nodeid for item in session.items])

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        refused = getattr(report, RESUME_REFUSED, None)
        if refused:  # a test plays its resumed rows otherwise: exit 4, before any episode
            self.output.refuse_resume(self.run, str(refused))
        refused = getattr(report, USAGE_REFUSED, None)
        # a test whose model nothing plays, or what only the whole collection shows
        if refused:
            self.refused = str(refused)
            raise pytest.UsageError(self.refused)
        self.accounts.count_collect_report(report)

    def check_usage(self, report: pytest.TestReport) -> None:
        """An episode whose answers reported no readable usage: warn, once, that the budget
        cannot count it (or stop, with --openenv-strict-budget)."""
        outcome = outcome_of(report)
        answers = outcome.usage_unknown if outcome is not None else 0
        if not answers or getattr(report, "rerun", 0):
            return
        assert outcome is not None
        where = f"{outcome.arm or 'the model'} (in {report.nodeid})"
        message = self.budget.unknown_usage(answers, where)
        if message is None:
            return
        if self.budget.stopped == message:
            self.stop(f"openenv: {message}")
            return
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.ensure_newline()
            terminal.write_line(self.secrets.scrub(f"openenv: WARNING: {message}"), yellow=True)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = outcome_of(report)
        halt = outcome.stop if outcome is not None else None
        if halt and not self.halted:
            # a worker's response cache is full: stop as a full output disk does
            self.halted = str(halt)
            self.end.notes.append(f"ERROR: {halt}; the run stopped (fix it, then --openenv-resume)")
            self.stop(f"openenv: {halt}")
        # counted means written: a Ctrl-C comes before or after both. Holding costs four
        # sigaction calls; a passed setup or teardown with no row (two reports of every
        # three) only marks its test reported, which no interrupt can leave half done
        held = contextlib.nullcontext() if only_marks_reported(report) else InterruptsHeld()
        with held:
            row = self.accounts.count(report)
            error = None if row is None else self.output.save(row)
        if error is not None:
            self.stop(f"openenv: {error}")
        self.check_usage(report)
        if self.budget.active:
            self.check_budget()
        self.slimmer.slim(report)
        self.show_progress()

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_from_serializable(self, config: pytest.Config, data: dict[str, Any]) -> None:
        """A worker's report is rebuilt (by pytest's own hook, after this one): its episode
        outcome an ``EpisodeOutcome`` again."""
        outcome_from_wire(data)

    def pytest_report_teststatus(
        self, report: pytest.TestReport, config: pytest.Config
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        outcome = outcome_of(report)
        if outcome is None or not outcome.has_figures or report.when != "call":
            return None
        detail = outcome.status_detail()
        if report.passed:
            return "passed", ".", (f"PASSED ({detail})", {"green": True})
        if report.failed and getattr(report, "judge_failed", False):
            # the judge fixture's model gave no verdict: an error of the run, not the agent's
            return "error", "E", (f"ERROR ({detail}; the judge gave no verdict)", {"red": True})
        if report.failed:
            return "failed", "F", (f"FAILED ({detail})", {"red": True})
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            self.report_not_started(session)

    def report_not_started(self, session: pytest.Session) -> None:
        """Items a budget kept from starting: skipped in pytest's line and JUnit too."""
        if self.budget.stopped is None or not self.collected:
            return
        from .not_started import report_not_started

        reported = self.accounts.reported
        left = [nodeid for nodeid in self.collected if nodeid not in reported]
        locations = {item.nodeid: item.location for item in session.items}
        reason = f"not started: {self.budget.stopped} (--openenv-resume runs it)"
        report_not_started(self.config, left, locations, reason)

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # before the terminal reporter formats it: see drop_entries_without_a_line
        drop_entries_without_a_line(excinfo.tb)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.accounts.clock.stop()  # the files written from here on are not the run's time
        if self.live is not None:
            self.live.close()  # before pytest writes its summary
        if self.settings.output.resume and self.accounts.active:
            self.accounts.count_rest_of_folder()
        collected = self.config.stash.get(SHARD_COLLECTION, None)
        if collected is not None:
            self.end.run.shard_tests = collected.tests
        try:
            self.end.apply_gate(session)
            self.end.align_junit()
            self.end.finish(int(session.exitstatus))
        finally:
            self.output.release(wrote=self.accounts.active)
        self.end.settle_exit_status(session)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.accounts.active:
            if self.output.was_claimed and self.end.exit_status == pytest.ExitCode.INTERRUPTED:
                # Ctrl-C before the first episode finished: say what became of the folder
                terminalreporter.section("openenv")
                for line in self.output.nothing_finished_lines():
                    terminalreporter.write_line(self.secrets.scrub(line))
            return
        terminalreporter.section("openenv")
        for line in self.end.terminal_lines():
            terminalreporter.write_line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # a session that ended before its sessionfinish
        if self.live is not None:
            self.live.close()
        self.output.release(wrote=self.accounts.active)
        self.sigterm.restore()
