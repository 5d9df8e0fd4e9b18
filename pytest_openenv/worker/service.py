"""Worker side: build episode items, run episodes, attach each result to its report.

Runs in every process that executes tests: each xdist worker, or the single
process with ``-n 0``. Nothing here writes files; the finished episode travels
to the controller as a JSON string on the call (or setup) report.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from ..config.settings import Settings
from ..envs.base import EnvFamily
from ..envs.registry import build_family
from ..envs.remote.servers import RemoteServers
from ..episode.loop import EnvFactory, Limits, run_episode
from ..episode.record import brief, dumps_record, placeholder_row, with_failure
from ..episode.result import Episode
from ..episode.spec import EpisodeSpec
from ..policies.base import Policy
from ..policies.registry import build_policy
from ..util.overload import OverloadSignal

SPEC_KEY = pytest.StashKey[EpisodeSpec]()
EPISODE_KEY = pytest.StashKey[Episode]()
ERROR_KEY = pytest.StashKey[str]()


class EpisodeService:
    """Per-process cache of env families and policies, and the episode executor.

    It owns what every episode of the process shares: ``overload`` (endpoints pushing
    back, which ``--openenv-concurrency auto`` listens to) and ``remote`` (what the
    process knows of its ``--openenv-server`` URLs), handed to the policies and env
    factories it builds.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.overload = OverloadSignal()
        self.remote = RemoteServers(overload=self.overload)
        self._families: dict[tuple[str, str], EnvFamily] = {}
        self._factories: dict[tuple[str, str], EnvFactory] = {}
        self._policies: dict[str, Policy] = {}
        self._lock = threading.Lock()

    def family(self, env: str, config: str) -> EnvFamily:
        key = (env, config)
        with self._lock:
            if key not in self._families:
                self._families[key] = build_family(
                    env,
                    json.loads(config),
                    self.servers(),
                    self.settings.run.prompt_style,
                    known=self.remote.known,
                )
            return self._families[key]

    def policy(self, name: str) -> Policy:
        with self._lock:
            if name not in self._policies:
                self._policies[name] = build_policy(name, self.settings, self.overload)
            return self._policies[name]

    def policy_for(self, spec: EpisodeSpec) -> Policy:
        """The policy an episode's spec names (its marker's, or the run's)."""
        return self.policy(spec.policy)

    def servers(self) -> tuple[str, ...]:
        """``--openenv-server`` URLs (with credentials, if given: connection use only)."""
        return tuple(self.settings.servers.urls)

    def env_factory(self, spec: EpisodeSpec) -> EnvFactory:
        key = (spec.env, spec.config)
        factory = self._factories.get(key)
        if factory is None:
            factory = EnvFactory(
                self.family(spec.env, spec.config), self.servers(), remote=self.remote
            )
            self._factories[key] = factory
        return factory

    def limits(self) -> Limits:
        return Limits(
            max_turns=self.settings.run.max_turns,
            timeout=self.settings.run.timeout,
            min_reward=self.settings.run.min_reward,
            judge_at=self.settings.run.judge_at,
        )

    def run(self, spec: EpisodeSpec, env: Any, policy: Policy) -> Episode:
        return run_episode(
            spec,
            env,
            policy,
            limits=self.limits(),
            system_prompt=self.settings.run.system_prompt,
            remote=self.remote,
        )

    def close(self) -> None:
        for policy in self._policies.values():
            policy.close()
        self.remote.close()  # kept sessions go back to their servers


def show_message_only_failures_cheaply(item: pytest.Item) -> None:
    """Skip pytest's traceback walk for failures that show only their message.

    pytest filters the whole traceback of every failure (some 30 frames, each
    path resolved) even for ``pytest.fail(..., pytrace=False)``, whose report is
    the message alone. Failed episodes are common in an eval (the bundled test
    fails that way), and that walk was most of what each one cost.
    ``--fulltrace`` keeps pytest's own path.
    """
    full_repr = item.repr_failure

    def repr_failure(excinfo: pytest.ExceptionInfo[BaseException], **kwargs: Any) -> Any:
        failed = excinfo.value
        if (
            isinstance(failed, pytest.fail.Exception)
            and not failed.pytrace
            and not item.config.getoption("fulltrace", False)
        ):
            return excinfo.getrepr(style="value", tbfilter=False)
        return full_repr(excinfo, **kwargs)

    item.repr_failure = repr_failure  # type: ignore[method-assign]


def failure_message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    text = message if message else str(report.longrepr)
    return text[-4000:]


def attach_to_report(
    item: pytest.Item, report: pytest.TestReport, tool_arguments: str = "string"
) -> None:
    """Put the episode on the report as JSON text: the controller is the only writer.

    ``tool_arguments`` (``--openenv-tool-arguments``): how the row's messages carry them.
    """
    spec = item.stash.get(SPEC_KEY, None)
    if spec is None:
        return
    report.openenv_episode_id = spec.episode_id  # type: ignore[attr-defined]
    episode = item.stash.get(EPISODE_KEY, None)
    record: dict[str, Any] | None = None
    if report.when == "setup" and report.failed:
        reason = item.stash.get(ERROR_KEY, None) or failure_message(report)
        if episode is None:
            record = placeholder_row(spec, reason, test=item.nodeid, tool_arguments=tool_arguments)
        else:
            record = episode.record(test=item.nodeid, passed=False, tool_arguments=tool_arguments)
            with_failure(record, "error", reason)
    elif report.when == "call" and episode is not None:
        record = episode.record(
            test=item.nodeid, passed=report.passed, tool_arguments=tool_arguments
        )
        if not report.passed:
            with_failure(record, "failed", failure_message(report))
    elif report.when == "call" and report.failed:
        # the test failed without ever building the episode (e.g. it raised before use)
        record = placeholder_row(spec, failure_message(report), test=item.nodeid)
    if record is not None:
        report.openenv_record = dumps_record(record)  # type: ignore[attr-defined]
        report.openenv_brief = brief(record)  # type: ignore[attr-defined]
        if episode is not None:  # the verdict's own words for the item status line
            report.openenv_brief["detail"] = episode.status_line()  # type: ignore[attr-defined]
        # junitxml writes the teardown report's user_properties, copied from the item
        # when that report is made; a few scalars only, never the record itself.
        item.user_properties.extend(
            [
                ("openenv.reward", record["reward"]),
                ("openenv.turns", record["metrics"]["turns"]),
                ("openenv.outcome", record["verify_metrics"]["outcome"]),
            ]
        )
    if report.when == "teardown" and EPISODE_KEY in item.stash:
        # release the transcript: items live for the whole session
        del item.stash[EPISODE_KEY]
