"""The families and policies of one pytest process, and the episode executor.

One per process (``plugin.pytest_configure`` makes it): the workers play episodes
with it, and the controller asks it the run's env family (pre-flight checks, the
policy a crashed episode played). Both sides use it, so it lives below both of them.
Nothing here writes files.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
from typing import Any

import pytest

from ..config.settings import Settings
from ..envs.base import EnvConfigError, EnvFamily
from ..envs.registry import build_family
from ..envs.remote.servers import RemoteServers
from ..policies.base import Policy
from ..policies.judging import Judge, build_judge
from ..policies.registry import build_policy
from ..util.overload import OverloadSignal
from .judged import judged_episode
from .loop import EnvFactory, Limits, run_episode
from .result import Episode
from .spec import EpisodeSpec


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
        self._policies: dict[tuple[str, str | None], Policy] = {}
        #: ``--openenv-judge``: built once, on first use (None: not yet, or no judge)
        self._judge: Judge | None = None
        #: what each agent program built is (name, version) for metadata.json
        self._agents: dict[tuple[str, str | None], dict[str, Any]] = {}
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

    def policy(self, name: str, model: str | None = None) -> Policy:
        """Policy ``name``, playing ``model`` (one of several ``--openenv-model``); None: the
        run's model."""
        if model == self.settings.llm.model:
            model = None  # the run's model: one policy object, however it was asked for
        key = (name, model)
        with self._lock:
            if key not in self._policies:
                settings = self.settings
                if model is not None:
                    settings = dataclasses.replace(settings, llm=settings.llm.for_model(model))
                built = self._policies[key] = build_policy(name, settings, self.overload)
                if hasattr(built, "drive_episode"):  # kept past ``close_agents``
                    self._agents[key] = built.describe()
            return self._policies[key]

    def run_family(self) -> EnvFamily | None:
        """The family of ``--openenv-env`` (None without one); a bad env is a usage error."""
        run = self.settings.run
        if not run.env:
            return None
        try:
            # cached: the family is built (and a generic one reads /schema) once per process
            return self.family(run.env, json.dumps(run.config, sort_keys=True))
        except EnvConfigError as exc:
            raise pytest.UsageError(f"--openenv-env={run.env!r}: {exc}") from None

    def run_policy_name(self) -> str | None:
        """The run's policy: named, else the env family's best teacher (expert where it plays)."""
        family = None if self.settings.run.policy else self.run_family()
        return self.settings.run.policy or (family.default_policy() if family else None)

    def policy_for(self, spec: EpisodeSpec) -> Policy:
        """The policy an episode's spec names (its marker's, or the run's)."""
        return self.policy(spec.policy, spec.model)

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

    @functools.cached_property
    def limits(self) -> Limits:
        """The episode limits of the run (its settings never change)."""
        return Limits(
            max_turns=self.settings.run.max_turns,
            timeout=self.settings.run.timeout,
            min_reward=self.settings.run.min_reward,
            judge_at=self.settings.run.judge_at,
            max_tokens=self.settings.budget.episode_max_tokens,
        )

    def judge(self) -> Judge | None:
        """The run's judge (``--openenv-judge``); None without one. Building it checks its key
        and SDK: a usage error, so the controller builds it before any episode."""
        judging = self.settings.judge
        if not judging.active and judging.rubric is None and judging.endpoint is None:
            return None  # every episode asks: the common case costs two reads
        if not judging.active:
            given = [
                flag
                for flag, value in (
                    ("--openenv-judge-rubric", judging.rubric),
                    ("--openenv-judge-endpoint", judging.endpoint),
                )
                if value is not None
            ]
            if given:  # what plays is what was asked: no judge would read them
                raise pytest.UsageError(
                    f"{' and '.join(given)} given without a judge model: pass "
                    "--openenv-judge MODEL (e.g. --openenv-judge=gpt-4o-mini)"
                )
            return None
        with self._lock:
            if self._judge is None:
                self._judge = build_judge(self.settings, self.overload)
            return self._judge

    def run(self, spec: EpisodeSpec, env: Any, policy: Policy) -> Episode:
        # an agent program (``agent_policy.py``) plays the whole episode, not turn by turn
        drive = getattr(policy, "drive_episode", None)
        if drive is not None:
            played = run_episode(
                spec,
                env,
                policy,
                limits=self.limits,
                system_prompt="",  # the agent's own system prompt is the one the model sees
                remote=self.remote,
                drive=drive,
            )
        else:
            played = run_episode(
                spec,
                env,
                policy,
                limits=self.limits,
                system_prompt=self.settings.run.system_prompt,
                remote=self.remote,
            )
        judge = self.judge()
        if judge is None:
            return played
        return judged_episode(played, judge)

    def agent_described(self, name: str) -> dict[str, Any]:
        """``agent:NAME`` as metadata.json records it (built now if it never was)."""
        key = (name, None)
        if key not in self._agents:
            self.policy(name)
        return self._agents[key]

    def close_agents(self) -> None:
        """Close the policies that run agent programs (``agent:NAME``): their proxies and any
        agent still running. Other policies stay, for the controller's end of the run."""
        with self._lock:
            agents = {k: p for k, p in self._policies.items() if hasattr(p, "drive_episode")}
            for key in agents:
                del self._policies[key]
        for policy in agents.values():
            policy.close()

    def close(self) -> None:
        with self._lock:
            policies, self._policies = list(self._policies.values()), {}
            judge, self._judge = self._judge, None
        for policy in policies:
            policy.close()
        if judge is not None:
            judge.close()
        self.remote.close()  # kept sessions go back to their servers
