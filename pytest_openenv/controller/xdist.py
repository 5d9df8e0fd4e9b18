"""The controller's xdist hooks: registered only where xdist is installed (syrupy's way).

What the workers are handed (the resume set, whether their queues are theirs to
run ahead, the row form, the servers that drop seeds), the scheduler, the collection every worker
reports, a crashed worker's report, each report as it is rebuilt from a worker, and the
workers' exit, which runs while the files are written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Generator
from typing import Any

import pytest

from .plugin import ControllerPlugin

#: workers per CPU beyond which ``-n`` looks like an episode count: xdist's own ``-n auto``
#: is one per CPU, and a run that waits on a model gets more in flight from
#: ``--openenv-concurrency`` (threads) than from processes, so even an I/O-bound suite
#: has little use for four times as many processes as CPUs
WORKERS_PER_CPU_AT_MOST = 4


class XdistController:
    name = "openenv-xdist-controller"

    def __init__(self, controller: ControllerPlugin, *, worker_addopts: str | None = None) -> None:
        self.controller = controller
        #: the workers' PYTEST_ADDOPTS: plugins the bundled test never calls left out
        self.worker_addopts = worker_addopts
        #: the workers' exit, under way while the end of the session writes the files
        self._teardown: threading.Thread | None = None
        self._warmed_up = False
        config = controller.config
        dist = config.getoption("dist", None)
        if controller.settings.run.env and dist in ("loadscope", "loadfile"):
            config.issue_config_time_warning(
                pytest.PytestWarning(
                    f"--dist {dist} sends all episodes of a test to one worker, so they run "
                    "one after another; use --dist load (the default with -n) to spread them"
                ),
                stacklevel=2,
            )
        # only in a run that names an env: another project's suite with -n 64 is not ours to
        # comment on (markers are not collected yet here, so a marker-only run stays quiet)
        too_many = workers_problem(config) if controller.settings.run.env else None
        if too_many is not None:  # at configure: before xdist starts a single worker
            config.issue_config_time_warning(pytest.PytestWarning(too_many), stacklevel=2)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        if self.worker_addopts is not None:
            from .worker_start import leave_out_in_workers

            leave_out_in_workers(specs, self.worker_addopts)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Hand each worker what it cannot read itself (it may not share our disk)."""
        from .schedule import keeps_queued_items

        controller = self.controller
        node.workerinput["openenv_resume_rows"] = [
            [nodeid, *row] for nodeid, row in controller.output.resumed.items()
        ]
        # workers see --dist as "no"; run-ahead needs to know whether items can be taken back
        dist = node.config.getoption("dist", None)
        node.workerinput["openenv_queue_is_certain"] = keeps_queued_items(dist)
        # the row form --openenv-chat-template chose, and what preflight read of the servers
        node.workerinput["openenv_tool_arguments"] = controller.settings.output.tool_arguments
        node.workerinput["openenv_servers"] = controller.service.remote.handover()
        # the controller's shard: a worker on another host may see other scheduler variables
        shard = controller.settings.run.shard
        node.workerinput["openenv_shard"] = shard.to_json() if shard is not None else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Keep each worker's queue as long as its episode run-ahead window."""
        from .schedule import make_scheduler

        scheduler = make_scheduler(config, log, self.controller.settings.run.concurrency)
        self.controller.stopper.scheduler = scheduler
        return scheduler

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # the controller never collects; every worker collects the same ids, and xdist
        # schedules nothing before every node has collected
        self.controller.claim_output(ids)
        if isinstance(ids, list):
            self.controller.slimmer.share_collection(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """--openenv-shard: the first worker's selection is the run's (every worker chose
        alike); its deselected items count in pytest's summary line as ``-k``'s would."""
        from ..config.shard import SHARD_COLLECTION, SHARD_WIRE, ShardCollection

        config = self.controller.config
        wire = getattr(node, "workeroutput", {}).get(SHARD_WIRE)
        if wire is None or SHARD_COLLECTION in config.stash:
            return
        collection = ShardCollection.from_wire(wire)
        config.stash[SHARD_COLLECTION] = collection
        if collection.deselected:
            items = [DeselectedItem(nodeid) for nodeid in collection.deselected]
            config.hook.pytest_deselected(items=items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        self.controller.accounts.decorate_crash_report(report, crashitem)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(
        self, config: pytest.Config, data: dict[str, Any]
    ) -> Generator[None, Any, Any]:
        """A worker's report is rebuilt: share what it has in common with its item's others."""
        self.controller.slimmer.before_rebuild(data)
        report = yield
        self.controller.slimmer.after_rebuild(report)
        if not self._warmed_up:
            self._warm_up()
        return report

    def _warm_up(self) -> None:
        """The first report from a worker: episodes are in flight, and the controller waits
        on them; what its end of session imports (report.html, the card) loads meanwhile."""
        from ..util import warmup

        self._warmed_up = True
        if self.controller.settings.run.env:
            warmup.start(self.controller.config)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Every worker has finished: they exit (each interpreter's own teardown, a few tenths
        of a second) while the files are written, instead of after them.

        xdist's own teardown of the nodes then finds them gone; the wait for them is ours
        (``pytest_unconfigure``), with xdist's timeout and its kill after it."""
        nodes = getattr(session.config.pluginmanager.get_plugin("dsession"), "nodemanager", None)
        if nodes is None or not self.controller.settings.run.env:
            return
        self._teardown = threading.Thread(
            target=nodes.teardown_nodes, name="openenv-worker-exit", daemon=True
        )
        # xdist's own call comes next, before the files: it finds the teardown under way
        nodes.teardown_nodes = _already_under_way
        self._teardown.start()

    def pytest_unconfigure(self) -> None:
        if self._teardown is not None:
            self._teardown.join()


class DeselectedItem:
    """An item a worker deselected, as the controller knows it: by its node id."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def _already_under_way() -> None:
    """xdist's teardown of the nodes once ours runs (``pytest_unconfigure`` waits for it)."""


def workers_problem(config: pytest.Config) -> str | None:
    """Why ``-n`` looks like ``openenv collect -n N`` typed from habit (N episodes, where
    here it starts N worker processes), if it does: far more workers than CPUs while
    ``--openenv-n`` is left at its default."""
    from ..config.options import given_as

    workers = config.getoption("numprocesses", None)
    cpus = os.cpu_count() or 1
    if not isinstance(workers, int) or workers <= WORKERS_PER_CPU_AT_MOST * cpus:
        return None
    if given_as(config, "n") is not None:
        return None
    return (
        f"-n {workers} starts {workers} pytest-xdist worker processes on {cpus} CPU(s); "
        f"-n is the number of workers, not of episodes: for {workers} episodes per test pass "
        f"--openenv-n={workers} (with -n auto, or -n 0 and --openenv-concurrency for a run "
        "that waits on a model)"
    )
