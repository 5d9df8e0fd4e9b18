"""What ``metadata.json`` says about the run: who wrote it, when, with which settings."""

from __future__ import annotations

import platform
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from ..config.settings import Settings
from ..dataset.folder import MARKER
from ..dataset.identity import run_identity
from ..report.gates import GateConfig

if TYPE_CHECKING:
    from ..episode.service import EpisodeService
    from .template import TemplateCheck


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class RunMetadata:
    def __init__(
        self,
        settings: Settings,
        service: EpisodeService,
        gate: GateConfig,
        template: TemplateCheck | None = None,
    ) -> None:
        self.settings = settings
        self.service = service
        self.gate = gate
        #: --openenv-chat-template: what the check found before the run; rows checked at the end
        self.template = template
        self.started_at = utc_now()
        #: --openenv-shard: the whole run's episode tests, as the collection found them
        self.shard_tests: dict[str, dict[str, Any]] = {}

    def samples(self, played: set[str] | frozenset[str]) -> bool:
        """Whether a policy that sends the sampling options played (or, before any row, is
        named for the run)."""
        from ..policies.registry import samples

        run = self.settings.run
        named = {*run.named_policies, self.service.run_policy_name() or ""}
        return any(samples(name) for name in (played or named) if name)

    def agents(self) -> list[dict[str, Any]]:
        """The agent programs the run names (``agent:NAME``) with their versions."""
        from ..policies.registry import AGENT_PREFIX

        found = []
        for name in self.settings.run.named_policies:
            if name.startswith(AGENT_PREFIX):
                found.append(self.service.agent_described(name))
        return found

    def identity(self) -> dict[str, Any]:
        """What must match for ``--openenv-resume`` to continue a folder (``dataset/identity``)."""
        judge = self.service.judge()
        return run_identity(
            self.settings, self.service.run_policy_name(), judge.identity() if judge else None
        )

    def to_json(
        self, *, finished: bool = True, played: set[str] | frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """``played``: the policies the rows name (at the end); before the run, the run's own."""
        from .._version import __version__

        settings = self.settings.public()
        identity = self.identity()
        if not self.samples(played):
            # a record never says the run did what it did not: nothing sampled
            for key in ("temperature", "max_tokens"):
                settings["llm"].pop(key, None)
                identity.pop(key, None)
        return {
            **MARKER,
            "tool": "pytest-openenv",
            "version": __version__,
            "started_at": self.started_at,
            "finished_at": utc_now() if finished else None,
            "identity": identity,
            "settings": settings,
            "python": platform.python_version(),
            "pytest": pytest.__version__,
            "platform": sys.platform,
            "license": self.settings.publish.license,
            "evaluation": {"repeats": self.settings.run.repeats, **self.gate.to_json()},
            "chat_template": self.template.to_json() if self.template else None,
            "judge": judge.identity() if (judge := self.service.judge()) else None,
            **self.shard_json(),
            **({"agents": agents} if (agents := self.agents()) else {}),
        }

    def shard_json(self) -> dict[str, Any]:
        """``shard``: which part of the run this folder holds, and the whole run's episode
        tests (what a merge names when a shard is missing); nothing in an unsharded run."""
        shard = self.settings.run.shard
        if shard is None:
            return {}
        return {"shard": {**shard.to_json(), "tests": self.shard_tests}}
