"""pytest hooks: thin, they set up the run and register the two sides.

``WorkerPlugin`` (``worker/plugin.py``) in every process that plays episodes: the
xdist workers, or the one process with ``-n 0``. ``ControllerPlugin``
(``controller/plugin.py``) in the process that sees every report: the xdist
controller, or that same one process. The controller's xdist hooks are a class of
their own (``controller/xdist.py``), registered only where xdist is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .config.options import register

if TYPE_CHECKING:
    from .config.settings import Settings
    from .controller.template import TemplateCheck
    from .episode.service import EpisodeService

# Everything but the options and the fixtures loads on first use: importing this module
# (which pytest does in every run) must stay cheap for the many runs that never touch an
# episode.

#: the public fixtures (docs/writing-tests.md), registered with this plugin
pytest_plugins = ("pytest_openenv.worker.fixtures",)

MARKER_HELP = (
    "openenv(env=None, *, n=None, seed=None, policy=None, policies=None, models=None, "
    "min_reward=None, judge_at=None, **env_config): run this test once per episode of the "
    "env (of each policy / model listed, on the same seeds); what it leaves out comes from "
    "--openenv-* options or ini"
)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def plays_episodes(config: pytest.Config) -> bool:
    """This process runs items: an xdist worker, or a run without xdist (not its controller).

    xdist distributes only with a mode and workers both: ``--dist`` set in an ini's addopts
    and no ``-n`` (or ``-n 0``) is a run of its own, which must play."""
    if is_worker(config):
        return True
    return config.getoption("dist", "no") == "no" or not config.getoption("tx", None)


def collects_items(config: pytest.Config) -> bool:
    """Everything but xdist's controller collects (``--collect-only`` starts no workers)."""
    return plays_episodes(config) or bool(config.getoption("collectonly"))


def pytest_addoption(parser: pytest.Parser) -> None:
    register(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from .util import heap
    from .worker import bundled
    from .worker.fixtures import EpisodeFixture
    from .worker.plugin import WorkerPlugin

    config.addinivalue_line("markers", MARKER_HELP)
    episode_fixture = EpisodeFixture()
    config.pluginmanager.register(episode_fixture, EpisodeFixture.name)
    heap.arrange_thaw(config)
    service, template = start_service(config)
    idle_in_workers: dict[str, object] = {}
    if not is_worker(config):
        from .controller import worker_start

        idle_in_workers = worker_start.loaded_idle_plugins(config)
    runs_bundled_test = bundled.take_over(config, service.settings)
    controller = None
    if not is_worker(config):
        # a worker never loads the controller's side (its imports are a worker's start-up)
        from .controller.plugin import ControllerPlugin

        controller = ControllerPlugin.start(config, service, template=template)
    if collects_items(config):
        resumed = controller.output.resumed if controller is not None else None
        worker = WorkerPlugin.start(config, service, bundled=runs_bundled_test, resumed=resumed)
        episode_fixture.player = worker.play
    if is_worker(config):
        from .worker import snapshot_writes

        snapshot_writes.register_if_needed(config)
    if controller is not None:
        from .worker import html_extras

        if html_extras.wanted(config):  # pytest-html's rows: episode duration and link
            rows = html_extras.HtmlRows(config, service.settings.output.folder)
            config.pluginmanager.register(rows, rows.name)
    if controller is not None and config.pluginmanager.hasplugin("xdist"):
        from .controller import worker_start
        from .controller.xdist import XdistController

        # the bundled test's workers start without the plugins it never calls
        idle = (
            worker_start.idle_plugins(config, idle_in_workers)
            if runs_bundled_test is not None
            else []
        )
        xdist_side = XdistController(controller, worker_addopts=worker_start.worker_addopts(idle))
        config.pluginmanager.register(xdist_side, XdistController.name)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    from .util import heap

    heap.freeze_for_exit(config)


def start_service(config: pytest.Config) -> tuple[EpisodeService, TemplateCheck | None]:
    """This process's families and policies, with the run's env and policy checked; and
    on the controller what ``--openenv-chat-template`` found."""
    from .episode.service import EpisodeService
    from .util import heap
    from .worker.run_policy import check_run_policy

    service = EpisodeService(read_settings(config))
    config.add_cleanup(service.close)
    template = None
    if is_worker(config):
        # what the controller read of its servers (one schema per run), before any family
        service.remote.learn(config.workerinput.get("openenv_servers", {}))  # type: ignore[attr-defined]
    else:
        from .controller.preflight import check_deployed_servers

        check_deployed_servers(config, service)  # before any episode; workers trust it
    policies = check_run_policy(config, service)  # fail fast on a bad one
    if service.settings.run.env:
        service.judge()  # --openenv-judge: its key and SDK checked before any episode
    if not is_worker(config):
        from .controller.judge_check import check_judge_endpoint
        from .controller.template import check_chat_template

        check_endpoints(config, service)  # once per run, before any episode
        check_judge_endpoint(config, service.settings)  # --openenv-judge's, as the policy's
        template = check_chat_template(service)  # before any episode: it fixes the row form
    if plays_episodes(config):
        for policy in policies:
            policy.load(strict=not is_worker(config))
    if service.settings.run.env:
        heap.freeze(config)  # what the run imported (an SDK) lives until exit
    return service, template


def check_endpoints(config: pytest.Config, service: EpisodeService) -> None:
    """The run's model endpoints answer, take the key and serve the model (controller)."""
    from .controller.model_check import check_model_endpoints
    from .errors import EnvConfigError
    from .policies.arms import arms_of
    from .worker.run_policy import run_policy_in_use

    settings = service.settings
    if not (run_policy_in_use(config) or settings.llm.endpoint):
        return  # a conftest's policy stands in for the run's: it may call no endpoint
    policies = settings.run.named_policies or (service.run_policy_name() or "scripted",)
    try:
        arms = arms_of(policies, settings.llm.named_models)
    except EnvConfigError:  # refused by check_run_policy already
        return
    check_model_endpoints(config, settings, arms)


def read_settings(config: pytest.Config) -> Settings:
    """The run's settings; on an xdist worker with the row form its controller chose."""
    import dataclasses

    from .config.settings import Settings

    settings = Settings.from_config(config)
    workerinput = getattr(config, "workerinput", {})
    chosen = workerinput.get("openenv_tool_arguments")
    if chosen:
        output = dataclasses.replace(settings.output, tool_arguments=chosen)
        settings = dataclasses.replace(settings, output=output)
    shard = workerinput.get("openenv_shard")
    if shard:
        from .config.shard import Shard

        run = dataclasses.replace(settings.run, shard=Shard(**shard))
        settings = dataclasses.replace(settings, run=run)
    return settings
