"""pytest-openenv: agent episodes in OpenEnv environments as pytest items.

Importing this package is cheap; engines and SDKs load only when an episode needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

_EXPORTS = {
    "Episode": "pytest_openenv.episode.result",
    "EpisodeSpec": "pytest_openenv.episode.spec",
    "Policy": "pytest_openenv.policies.base",
    "Reply": "pytest_openenv.policies.base",
    "ToolCall": "pytest_openenv.policies.base",
    "Turn": "pytest_openenv.policies.base",
    "Usage": "pytest_openenv.policies.base",
    "EnvFamily": "pytest_openenv.envs.base",
    "Backend": "pytest_openenv.envs.base",
    "StepResult": "pytest_openenv.envs.base",
    "ToolSpec": "pytest_openenv.envs.base",
    "ProposedCall": "pytest_openenv.proposals",
    "OpenEnvError": "pytest_openenv.errors",
    "ActionRejected": "pytest_openenv.errors",
    "EnvUnavailable": "pytest_openenv.errors",
    "EnvConfigError": "pytest_openenv.errors",
    "JudgeFailed": "pytest_openenv.errors",
    "JudgeVerdict": "pytest_openenv.policies.judging.verdict",
    "run_episode": "pytest_openenv.episode.loop",
    "EnvFactory": "pytest_openenv.episode.loop",
    "Limits": "pytest_openenv.episode.loop",
    "to_episode_record": "pytest_openenv.episode.openenv_record",
    "from_episode_record": "pytest_openenv.episode.openenv_record",
    "episode_record_fields": "pytest_openenv.episode.openenv_record",
}

if TYPE_CHECKING:
    from .envs.base import Backend, EnvFamily, StepResult, ToolSpec
    from .episode.loop import EnvFactory, Limits, run_episode
    from .episode.openenv_record import (
        episode_record_fields,
        from_episode_record,
        to_episode_record,
    )
    from .episode.result import Episode
    from .episode.spec import EpisodeSpec
    from .errors import (
        ActionRejected,
        EnvConfigError,
        EnvUnavailable,
        JudgeFailed,
        OpenEnvError,
    )
    from .policies.base import Policy, Reply, ToolCall, Turn, Usage
    from .policies.judging.verdict import JudgeVerdict
    from .proposals import ProposedCall


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_openenv' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "ActionRejected",
    "Backend",
    "EnvConfigError",
    "EnvFactory",
    "EnvFamily",
    "EnvUnavailable",
    "Episode",
    "EpisodeSpec",
    "JudgeFailed",
    "JudgeVerdict",
    "Limits",
    "OpenEnvError",
    "Policy",
    "ProposedCall",
    "Reply",
    "StepResult",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "Usage",
    "episode_record_fields",
    "from_episode_record",
    "run_episode",
    "to_episode_record",
]
