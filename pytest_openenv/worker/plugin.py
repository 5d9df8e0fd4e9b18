"""Worker side: the plugin of every process that plays episodes.

An xdist worker, or the single pytest process with ``-n 0`` (where the controller
side lives too). ``WorkerPlugin`` turns episode tests into items, plays each item's
episode (inline, or ahead on a pool: ``runahead.py``) and puts the finished episode
on its reports for the controller. Nothing here writes files.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from ..config.settings import Settings
from ..dataset.identity import RESUME_REFUSED, USAGE_REFUSED, RowIdentity
from ..episode.outcome import outcome_to_wire
from ..episode.service import EpisodeService
from ..episode.spec import EpisodeSpec
from ..errors import CacheUnwritable
from ..util import heap
from ..util.secrets import KnownSecrets
from ..util.signals import TermAsInterrupt, drop_entries_without_a_line
from ..util.terminal import neutralise_report
from .bundled import BundledRun, bundled_items
from .fixtures import EPISODE_FIXTURE
from .items import EPISODE_KEY, ERROR_KEY, SPEC_KEY, STOP_KEY, spec_of
from .judge_fixture import JudgeFixture
from .marker import parametrize
from .reporting import attach_to_report, message_only_report, shows_message_only
from .resume_check import ResumeCheck
from .runahead import Runahead
from .what_plays import WhatPlays
from .xdist_queue import WorkerQueue

if TYPE_CHECKING:
    from ..episode.result import Episode

WORKER_KEY: pytest.StashKey[WorkerPlugin] = pytest.StashKey()


class WorkerPlugin:
    """The worker side's state for one run, and its hooks."""

    name = "openenv-worker"

    def __init__(
        self,
        config: pytest.Config,
        service: EpisodeService,
        *,
        bundled: BundledRun | None,
        resumed: Mapping[str, RowIdentity],
    ) -> None:
        self.config = config
        self.settings: Settings = service.settings
        #: this process's families and policies (shared with the controller under -n 0)
        self.service = service
        #: set on an xdist worker: what its controller handed over
        self.workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
        on_worker = self.workerinput is not None
        run = self.settings.run
        self.runahead = Runahead(
            config,
            service,
            concurrency=run.concurrency,
            timeout=run.timeout,
            worker_queue=WorkerQueue(config) if on_worker else None,
            queue_is_certain=bool((self.workerinput or {}).get("openenv_queue_is_certain")),
            warm_up=not on_worker,
            prepare_rows=(self.settings.output.tool_arguments or "string")
            if bundled is not None
            else None,
        )
        #: the run plays the bundled episode test (``--openenv-env`` and no paths): what it
        #: left out; None in a run of test files
        self.bundled = bundled
        #: node ids already in results.jsonl (``--openenv-resume``): skipped, once each
        #: test is found to play its rows as they were played (``resume_check.py``)
        self.resumed = resumed
        self.resume_check = ResumeCheck(resumed) if resumed else None
        #: tests refused for a model or sampling option their policies do not use
        self.what_plays = WhatPlays()
        self.secrets = KnownSecrets.from_settings(self.settings)
        self.tool_arguments = self.settings.output.tool_arguments or "string"
        #: the collection holds episode items (decided once it is made)
        self.has_episodes = False
        #: a test's collection error that makes the run a usage error (exit 4)
        self.usage_refused: str | None = None
        self.sigterm = TermAsInterrupt()
        #: a run without xdist: the controller gets this process's reports themselves, so an
        #: outcome may keep the row dict its line was dumped from (``episode/outcome.py``)
        self.one_process = self.workerinput is None

    @classmethod
    def start(
        cls,
        config: pytest.Config,
        service: EpisodeService,
        *,
        bundled: BundledRun | None,
        resumed: Mapping[str, RowIdentity] | None,
    ) -> WorkerPlugin:
        """Make and register the plugin; ``resumed``: the controller's resume set (``-n 0``),
        or None on an xdist worker, which is handed it."""
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            resumed = {
                nodeid: RowIdentity(*row)
                for nodeid, *row in workerinput.get("openenv_resume_rows", ())
            }
        plugin = cls(config, service, bundled=bundled, resumed=resumed or {})
        config.stash[WORKER_KEY] = plugin
        config.pluginmanager.register(plugin, cls.name)
        config.pluginmanager.register(JudgeFixture(service), JudgeFixture.name)
        if plugin.runahead.adaptive is not None and workerinput is None:
            config.pluginmanager.register(plugin.runahead, "openenv-runahead")  # its summary
        return plugin

    @staticmethod
    def of(config: pytest.Config) -> WorkerPlugin:
        return config.stash[WORKER_KEY]

    # -- collection --------------------------------------------------------------
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if EPISODE_FIXTURE not in metafunc.fixturenames:
            return
        try:
            parametrize(metafunc, self.settings, self.service, self.resume_check, self.what_plays)
        except pytest.Collector.CollectError as exc:
            from ..policies.llm.common import NEEDS_MODEL

            if NEEDS_MODEL in str(exc):  # no model anywhere: the run's mistake, not the test's
                self.usage_refused = str(exc)
            raise

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        """A collection the resume check failed carries why to the controller (exit 4), and
        so does one the what-plays check refused or that found an LLM policy with no model."""
        report = yield
        refused = self.resume_check.take() if self.resume_check is not None else None
        if refused and report.failed:
            setattr(report, RESUME_REFUSED, refused)
        unplayed = self.what_plays.take() or self.usage_refused
        self.usage_refused = None
        if unplayed and report.failed:
            setattr(report, USAGE_REFUSED, unplayed)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if self.bundled is not None:
            items[:0] = bundled_items(session, self.bundled)
        self.has_episodes = self.mark_episode_items(items)
        problem = self.what_plays.run_wide_problem() if self.has_episodes else None
        if problem is not None:
            # the command line's model plays in no test of the run: a failed collection
            # report carries it to the controller (an xdist worker cannot raise exit 4)
            report = pytest.CollectReport("", "failed", problem, [])
            setattr(report, USAGE_REFUSED, problem)
            config.hook.pytest_collectreport(report=report)
        if self.has_episodes and problem is None:
            from .collection_check import collection_problem, refuse_collection

            problem = collection_problem(self.settings, items)
            if problem is not None:
                refuse_collection(config, problem)
        shard = self.settings.run.shard
        if self.has_episodes and shard is not None:
            from .shard_select import select_shard

            select_shard(config, items, shard)

    def mark_episode_items(self, items: list[pytest.Item]) -> bool:
        """Stash each episode item's spec, skip what ``--openenv-resume`` has; any found?"""
        found = False
        for item in items:
            callspec = getattr(item, "callspec", None)
            spec = callspec.params.get(EPISODE_FIXTURE) if callspec is not None else None
            if not isinstance(spec, EpisodeSpec):
                continue
            found = True
            item.stash[SPEC_KEY] = spec
            if item.nodeid in self.resumed:
                item.add_marker(
                    pytest.mark.skip(reason=f"{spec.episode_id} already played (resume)")
                )
        return found

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.has_episodes:
            if self.workerinput is not None:
                # SIGTERM to the whole group (a CI runner): stop as on Ctrl-C, no traceback
                self.sigterm.install()
            heap.freeze(self.config)  # the items live until the session ends
            heap.fewer_young_collections(self.config)
            # kept between episodes, a worker's sessions could starve another on a small server
            self.service.remote.keep_sessions(self.workerinput is None)

    # -- playing -----------------------------------------------------------------
    def play(self, item: pytest.Item, env: Any, policy: Any) -> Episode:
        """The ``openenv_episode`` fixture: play ``item``'s episode with these fixtures."""
        from ..episode.loop import EpisodeError, as_env_factory
        from ..episode.result import Episode as Played
        from ..policies.adapt import as_policy
        from .defaults import resolve

        spec = spec_of(item)
        if spec is None:
            raise pytest.UsageError(
                f"{item.nodeid} uses an openenv fixture but is not an episode test: "
                "request the `episode` (or `openenv_episode`) fixture and set --openenv-env or "
                "@pytest.mark.openenv(...)"
            )
        try:
            factory = as_env_factory(resolve(env, spec, self.service.env_factory))
            chosen = as_policy(resolve(policy, spec, self.service.policy_for))
            finished = self.runahead.episode(item, spec, factory, chosen)
        except (EpisodeError, CacheUnwritable) as exc:
            error = str(exc)
            partial = getattr(exc, "partial", None)
            if isinstance(partial, Played):  # its row keeps the turns and tokens played
                item.stash[EPISODE_KEY] = partial
            cause = exc if isinstance(exc, CacheUnwritable) else exc.__cause__
            if isinstance(cause, CacheUnwritable):
                # the controller stops the run, as for a full output disk
                item.stash[STOP_KEY] = str(cause)
        else:
            error = None
        if error is not None:
            # failed outside the except block, so the report shows the message, not its chain
            item.stash[ERROR_KEY] = error
            pytest.fail(f"episode error: {error}", pytrace=False)
        item.stash[EPISODE_KEY] = finished
        return finished

    # -- reports -----------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True, specname="pytest_runtest_makereport")
    def pytest_runtest_makereport_message_only(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> pytest.TestReport | None:
        """A failed episode that shows only its message skips pytest's traceback walk."""
        return message_only_report(item, call) if shows_message_only(item, call) else None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        spec = spec_of(item)  # its env config may hold a credential of its own (the marker's)
        secrets = self.secrets.with_config(spec.config) if spec is not None else self.secrets
        outcome = attach_to_report(
            item,
            report,
            self.tool_arguments,
            self.settings.budget.prices,
            train_on=self.settings.output.train_on,
            # a scrubbed line is no longer the dict's JSON: the controller digests the line
            keep_row=self.one_process and not secrets.active,
        )
        if secrets.active:
            # one choke point for what JUnit XML, the terminal and the controller receive
            secrets.scrub_report(report)
        # after the row was made (it keeps the text as it was): what the terminal prints
        neutralise_report(report)
        if outcome is not None and outcome.line is not None:
            from . import html_extras

            if html_extras.wanted(item.config):
                html_extras.attach_transcript(report)  # pytest-html: the transcript per item
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(
        self, config: pytest.Config, report: pytest.CollectReport | pytest.TestReport
    ) -> Generator[None, dict[str, Any] | None, dict[str, Any] | None]:
        """An xdist worker sends a report: its episode outcome goes as a plain dict (the
        controller side makes it an ``EpisodeOutcome`` again)."""
        data = yield
        if data is not None:
            outcome_to_wire(data)
        return data

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # before the terminal reporter formats it: see drop_entries_without_a_line
        drop_entries_without_a_line(excinfo.tb)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.runahead.close()
        self.service.remote.close()  # kept sessions go back to their servers
        # an agent program whose episode was given up on (past --openenv-timeout) is ended
        # with its process group, and the capture proxy stops
        self.service.close_agents()
        self.sigterm.restore()
