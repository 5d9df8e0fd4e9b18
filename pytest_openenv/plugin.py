"""pytest hooks and fixtures: thin, they only route to the worker or controller side.

``worker.py`` builds and runs episodes (every test-running process);
``controller.py`` writes files and figures (the process that sees all reports).
With ``-n 0`` both live in the one pytest process.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .config.options import register
from .config.settings import Settings, check_output_writable
from .worker.defaults import DEFAULT_ENV, DEFAULT_POLICY, SuiteDefault

if TYPE_CHECKING:
    from .controller.plugin import Controller
    from .episode.result import Episode
    from .episode.spec import EpisodeSpec
    from .util.secrets import KnownSecrets
    from .worker.runahead import Runahead
    from .worker.service import EpisodeService

# Everything but the options loads on first use: importing this module (which pytest does
# in every run) must stay cheap for the many runs that never touch an episode.

SETTINGS_KEY = pytest.StashKey[Settings]()
SERVICE_KEY: pytest.StashKey[EpisodeService] = pytest.StashKey()
RUNAHEAD_KEY: pytest.StashKey[Runahead] = pytest.StashKey()
CONTROLLER_KEY: pytest.StashKey[Controller] = pytest.StashKey()
BUNDLED_KEY = pytest.StashKey[bool]()
RESUME_KEY = pytest.StashKey[frozenset[str]]()
HAS_EPISODES_KEY = pytest.StashKey[bool]()
SECRETS_KEY: pytest.StashKey[KnownSecrets] = pytest.StashKey()

MARKER_HELP = (
    "openenv(env=None, *, n=None, seed=None, policy=None, min_reward=None, judge_at=None, "
    "**env_config): run this test once per episode of the env; what it leaves out comes "
    "from --openenv-* options or ini"
)


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


#: plugins the bundled episode test never uses, each with what it would cost at the end of
#: a run: syrupy's unused-snapshot search sends every collected item from each xdist worker
#: and rebuilds them all on the controller (about 1.3 KB per episode: 130 MB for 100,000);
#: hypothesis' terminal summary walks every report and imports all of hypothesis, in each
#: worker too (a fifth of a second of CPU per process)
IDLE_IN_BUNDLED_RUNS = ("syrupy", "hypothesispytest")


def leave_out_idle_plugins(config: pytest.Config) -> None:
    """As ``-p no:NAME`` would, for a run of the bundled test only (their options still parse)."""
    for name in IDLE_IN_BUNDLED_RUNS:
        if config.pluginmanager.has_plugin(name):
            config.pluginmanager.unregister(name=name)


def worker_settings(settings: Settings, tool_arguments: str) -> Settings:
    import dataclasses

    output = dataclasses.replace(settings.output, tool_arguments=tool_arguments)
    return dataclasses.replace(settings, output=output)


def plays_episodes(config: pytest.Config) -> bool:
    """This process runs items: an xdist worker, or a run without xdist (not its controller)."""
    return is_worker(config) or config.getoption("dist", "no") == "no"


def pytest_addoption(parser: pytest.Parser) -> None:
    register(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    from .controller.plugin import Controller, read_resume_set
    from .controller.preflight import check_servers, check_sessions
    from .envs.base import EnvConfigError
    from .util import heap
    from .worker.runahead import Runahead
    from .worker.service import EpisodeService

    config.addinivalue_line("markers", MARKER_HELP)
    heap.arrange_thaw(config)
    settings = Settings.from_config(config)
    if is_worker(config) and config.workerinput.get("openenv_tool_arguments"):  # type: ignore[attr-defined]
        # the controller's --openenv-chat-template check chose the form rows are built in
        settings = worker_settings(settings, config.workerinput["openenv_tool_arguments"])  # type: ignore[attr-defined]
    config.stash[SETTINGS_KEY] = settings
    from .util.secrets import KnownSecrets

    config.stash[SECRETS_KEY] = KnownSecrets.from_settings(settings)
    config.stash[SERVICE_KEY] = EpisodeService(settings)
    if is_worker(config):  # what the controller read of its servers: one schema per run
        config.stash[SERVICE_KEY].remote.learn(config.workerinput.get("openenv_servers", {}))  # type: ignore[attr-defined]
    config.stash[RUNAHEAD_KEY] = Runahead.from_settings(config, config.stash[SERVICE_KEY])
    if settings.servers.urls and not is_worker(config):
        check_servers(settings)  # one GET /health each: a down server is one usage error
    if settings.run.env:
        try:
            # cached: the family is built (and a generic one reads /schema) once per process
            family = config.stash[SERVICE_KEY].family(
                settings.run.env, json.dumps(settings.run.config, sort_keys=True)
            )
        except EnvConfigError as exc:
            raise pytest.UsageError(f"--openenv-env={settings.run.env!r}: {exc}") from None
        if settings.servers.urls and not is_worker(config):
            remote = config.stash[SERVICE_KEY].remote  # what the episodes of -n 0 will use
            # one session each: hosting another env is a usage error, dropping the seed a warning
            check_sessions(config, settings, family, remote)
    # the run's policy: named, else the env family's best teacher (expert where it plays)
    run_policy = settings.run.policy or (family.default_policy() if settings.run.env else None)
    policy = config.stash[SERVICE_KEY].policy(run_policy or "scripted")  # fail fast on a bad one
    if settings.run.env and _run_policy_in_use(config):
        from .policies.registry import check_fits, check_honoured

        where = (
            f"--openenv-policy={run_policy}"
            if settings.run.policy
            else f"no --openenv-policy is given, and the default teacher ({run_policy})"
        )
        check_fits(policy, family, where)
        check_honoured(str(run_policy), family, where)
    template_check = None
    if settings.output.chat_template and not is_worker(config):
        from .controller.template import prepare

        # before any episode: workers build rows in the form this chooses
        settings, template_check = prepare(settings, family if settings.run.env else None)
        config.stash[SETTINGS_KEY] = settings
        config.stash[SERVICE_KEY].settings = settings
    if plays_episodes(config):
        policy.load(strict=not is_worker(config))
    if settings.run.env:
        heap.freeze(config)  # what the run imported (an SDK) lives until exit
    no_paths = config.args_source != pytest.Config.ArgsSource.ARGS
    config.stash[BUNDLED_KEY] = bool(settings.run.env) and no_paths
    if config.stash[BUNDLED_KEY]:
        leave_out_idle_plugins(config)
        config.args[:] = []
    if is_worker(config):
        done = config.workerinput.get("openenv_resume_done", ())  # type: ignore[attr-defined]
        config.stash[RESUME_KEY] = frozenset(done)
        return
    check_output_writable(settings.output.folder)
    done_ids: set[str] = set()
    if settings.output.resume:
        done_ids, torn = read_resume_set(settings)
        if torn:
            config.issue_config_time_warning(
                pytest.PytestWarning(
                    f"{settings.output.folder / 'results.jsonl'} ended in a torn line (an "
                    "earlier run was killed mid-write); the partial line was removed and will "
                    "be re-run"
                ),
                stacklevel=2,
            )
    config.stash[RESUME_KEY] = frozenset(done_ids)
    dist = config.getoption("dist", None)
    if settings.run.env and dist in ("loadscope", "loadfile"):
        config.issue_config_time_warning(
            pytest.PytestWarning(
                f"--dist {dist} sends all episodes of a test to one worker, so they run one "
                "after another; use --dist load (the default with -n) to spread them"
            ),
            stacklevel=2,
        )
    controller = Controller(config, settings, config.stash[SERVICE_KEY], template=template_check)
    config.stash[CONTROLLER_KEY] = controller
    config.pluginmanager.register(controller, "openenv-controller")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: hand the resume set to each worker (they may not share our disk)."""
    done = node.config.stash.get(RESUME_KEY, frozenset())
    node.workerinput["openenv_resume_done"] = sorted(done)
    # workers see --dist as "no"; run-ahead needs to know whether items can be taken back
    node.workerinput["openenv_dist"] = node.config.getoption("dist", None)
    settings = node.config.stash.get(SETTINGS_KEY, None)
    if settings is not None:
        node.workerinput["openenv_tool_arguments"] = settings.output.tool_arguments
    service = node.config.stash.get(SERVICE_KEY, None)
    node.workerinput["openenv_servers"] = service.remote.handover() if service else {}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist controller: keep each worker's queue as long as its episode run-ahead window."""
    from .controller.schedule import make_scheduler

    settings = config.stash.get(SETTINGS_KEY, None)
    concurrency = settings.run.concurrency if settings is not None else None
    return make_scheduler(config, log, concurrency)


#: the fixture episodes are parametrized on; ``episode`` is its short name for episode
#: tests, and a suite's own ``episode`` fixture (one not built on it) is left alone
EPISODE_FIXTURE = "openenv_episode"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if EPISODE_FIXTURE not in metafunc.fixturenames:
        return
    from .envs.base import EnvConfigError
    from .worker.marker import episode_test

    settings = metafunc.config.stash[SETTINGS_KEY]
    service = metafunc.config.stash[SERVICE_KEY]
    where = metafunc.definition.nodeid
    # A mistake in a test's marker is one collection error naming the test, with no
    # traceback, before any episode runs (not an error on every one of its items).
    try:
        test = episode_test(settings, metafunc.definition.get_closest_marker("openenv"))
        family = service.family(test.env, test.config)
    except EnvConfigError as exc:
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    policy = test.policy or family.default_policy()
    chosen_by = test.policy_source or f"the default teacher of {test.env} ({policy})"
    try:
        service.policy(policy)
    except pytest.UsageError as exc:
        raise pytest.Collector.CollectError(f"{where}: {chosen_by} cannot be used: {exc}") from None
    if _uses_default_policy(metafunc):
        from .policies.registry import check_fits, check_honoured

        try:
            check_fits(service.policy(policy), family, chosen_by)
            check_honoured(policy, family, chosen_by)
        except pytest.UsageError as exc:
            raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    specs = test.specs(policy, settings)
    metafunc.parametrize(
        EPISODE_FIXTURE, specs, ids=[spec.episode_id for spec in specs], indirect=True
    )


def _run_policy_in_use(config: pytest.Config) -> bool:
    """Will episodes play the run's policy? Named on purpose (command line or ini), or the
    bundled test with no conftest ``openenv_policy`` fixture to stand in for it."""
    dest = "openenv_policy"
    if config.getoption(dest, None) or config.getini(dest):
        return True
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return False  # test files may override the fixture; pytest_generate_tests checks them
    return not any(
        getattr(plugin, "__name__", "").rpartition(".")[2] == "conftest"
        and hasattr(plugin, "openenv_policy")
        for plugin in config.pluginmanager.get_plugins()
    )


def _uses_default_policy(metafunc: pytest.Metafunc) -> bool:
    """The test gets its policy from this plugin's ``openenv_policy``, not an override."""
    defs = metafunc.definition._fixtureinfo.name2fixturedefs.get("openenv_policy")
    return bool(defs) and getattr(defs[-1].func, "__module__", None) == __name__


class _BundledModule(pytest.Module):
    def _getobj(self) -> Any:
        from .worker import bundled_test

        return bundled_test


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if config.stash.get(BUNDLED_KEY, False):
        from .worker import bundled_test

        module = _BundledModule.from_parent(
            session, path=Path(bundled_test.__file__), nodeid="openenv"
        )
        items[:0] = list(session.genitems(module))
    from .episode.spec import EpisodeSpec
    from .worker.service import SPEC_KEY, show_message_only_failures_cheaply

    done = config.stash.get(RESUME_KEY, frozenset())
    config.stash[HAS_EPISODES_KEY] = False
    for item in items:
        callspec = getattr(item, "callspec", None)
        spec = callspec.params.get(EPISODE_FIXTURE) if callspec is not None else None
        if not isinstance(spec, EpisodeSpec):
            continue
        config.stash[HAS_EPISODES_KEY] = True
        item.stash[SPEC_KEY] = spec
        show_message_only_failures_cheaply(item)
        if item.nodeid in done:
            item.add_marker(
                pytest.mark.skip(reason=f"{spec.episode_id} already in results.jsonl (resume)")
            )


# Session-scoped and dependency-free: each episode resolves the default when it starts
# (``defaults.resolve``), which spares pytest two fixture setups and teardowns per item.
@pytest.fixture(scope="session")
def openenv_env() -> SuiteDefault:
    """The env factory: each episode gets the env its marker or ``--openenv-env`` names.

    Override with any object that has ``family`` and ``open(spec)`` (e.g. an
    ``EnvFactory``), or ``for_episode(spec)`` returning one (or this default).
    """
    return DEFAULT_ENV


@pytest.fixture(scope="session")
def openenv_policy() -> SuiteDefault:
    """The policy: each episode gets the one its marker or ``--openenv-policy`` names.

    Override with a ``Policy``, a callable ``policy(messages, tools)``, or an object
    with ``for_episode(spec)`` returning one of those (or this default).
    """
    return DEFAULT_POLICY


@pytest.fixture
def openenv_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot`` storing one readable JSON file per episode test."""
    from .testing.snapshots import TrajectorySnapshotExtension

    return snapshot.use_extension(TrajectorySnapshotExtension)


@pytest.fixture
def episode(openenv_episode: Episode) -> Episode:
    """The finished episode (``openenv_episode`` by its short name, DESIGN §3).

    A suite whose conftest defines its own ``episode`` keeps it: tests using that one
    are not episode tests; its episode tests request ``openenv_episode``.
    """
    return openenv_episode


@pytest.fixture
def openenv_episode(
    request: pytest.FixtureRequest, openenv_env: Any, openenv_policy: Any
) -> Episode:
    """Run the episode during setup and return it finished."""
    from .episode.loop import EpisodeError, as_env_factory
    from .policies.adapt import as_policy
    from .worker.defaults import resolve
    from .worker.service import EPISODE_KEY, ERROR_KEY

    spec = _spec_of(request)
    service = request.config.stash[SERVICE_KEY]
    runahead = request.config.stash[RUNAHEAD_KEY]  # inline, or concurrent (prefetch.py)
    try:
        env = as_env_factory(resolve(openenv_env, spec, service.env_factory))
        policy = as_policy(resolve(openenv_policy, spec, service.policy_for))
        finished = runahead.episode(request.node, spec, env, policy)
    except EpisodeError as exc:
        error = str(exc)
    else:
        error = None
    if error is not None:
        # failed outside the except block, so the report shows the message, not its chain
        request.node.stash[ERROR_KEY] = error
        pytest.fail(f"episode error: {error}", pytrace=False)
    request.node.stash[EPISODE_KEY] = finished
    return finished


def _spec_of(request: pytest.FixtureRequest) -> EpisodeSpec:
    from .worker.service import SPEC_KEY

    spec = request.node.stash.get(SPEC_KEY, None)
    if spec is None:
        raise pytest.UsageError(
            f"{request.node.nodeid} uses an openenv fixture but is not an episode test: "
            "request the `episode` (or `openenv_episode`) fixture and set --openenv-env or "
            "@pytest.mark.openenv(...)"
        )
    return spec


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    from .worker.service import attach_to_report

    settings = item.config.stash.get(SETTINGS_KEY, None)
    tool_arguments = settings.output.tool_arguments if settings is not None else None
    attach_to_report(item, report, tool_arguments or "string")
    secrets = item.config.stash.get(SECRETS_KEY, None)
    if secrets is not None and secrets.active:
        # one choke point for what JUnit XML, the terminal and the controller receive
        secrets.scrub_report(report)
    if getattr(report, "openenv_record", None) is not None:
        from .worker import html_extras

        if html_extras.wanted(item.config):
            html_extras.attach_transcript(report)  # pytest-html: the transcript per item
    return report


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
    brief = getattr(report, "openenv_brief", None)
    if brief is None or report.when != "call":
        return None
    detail = brief.get("detail") or (
        f"reward={brief['reward']:g} turns={brief['turns']} {brief['outcome']}"
    )
    if report.passed:
        return "passed", ".", (f"PASSED ({detail})", {"green": True})
    if report.failed:
        return "failed", "F", (f"FAILED ({detail})", {"red": True})
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    from .util import heap

    if session.config.stash.get(HAS_EPISODES_KEY, False):
        heap.freeze(session.config)  # the items live until the session ends
        # kept between episodes, a worker's sessions could starve another on a small server
        session.config.stash[SERVICE_KEY].remote.keep_sessions(not is_worker(session.config))


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    runahead = session.config.stash.get(RUNAHEAD_KEY, None)
    if runahead is not None:
        runahead.close()
    service = session.config.stash.get(SERVICE_KEY, None)
    if service is not None:
        service.close()  # its policies, and the sessions it kept
