"""Turn ``--openenv-policy`` into a ``Policy`` (whether it fits the env: ``worker/policy_fit.py``).

``scripted``, ``random`` and ``expert`` need no model; ``openai`` and ``anthropic`` call a
hosted model (or any OpenAI-compatible endpoint); ``transformers`` runs a local checkpoint
in-process; ``pkg.module:callable`` loads a user's function. ``--openenv-cache`` wraps the
model-backed ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .base import Policy
from .expert import ExpertPolicy
from .scripted import RandomPolicy, ScriptedPolicy

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..util.overload import OverloadSignal

BUILTIN = {"scripted": ScriptedPolicy, "random": RandomPolicy, "expert": ExpertPolicy}
LLM = ("openai", "anthropic", "transformers")


def build_policy(name: str, settings: Settings, overload: OverloadSignal | None = None) -> Policy:
    """The policy ``name``; a model-backed one tells ``overload`` of its endpoint's pushback."""
    if settings.llm.replay and not settings.llm.cache:
        raise pytest.UsageError(
            "--openenv-replay needs --openenv-cache DIR (the recorded responses to replay)"
        )
    if name in BUILTIN:
        return BUILTIN[name]()
    if name == "transformers":
        from .llm.transformers_local import build_transformers_policy

        policy: Policy = build_transformers_policy(settings)
    elif name in LLM:
        from .llm.common import build_llm_policy

        policy = build_llm_policy(name, settings, overload)
    else:
        check_known(name)
        from .callable import load_policy

        policy = load_policy(name)
    from ..util.secrets import KnownSecrets
    from .cache import wrap_with_cache

    return wrap_with_cache(policy, settings.llm, name, KnownSecrets.from_settings(settings))


def check_known(name: str) -> None:
    """Raise ``pytest.UsageError`` unless ``name`` is a policy this registry can build."""
    if name in BUILTIN or name in LLM or ":" in name:
        return
    raise pytest.UsageError(
        f"--openenv-policy={name!r} is unknown; choose one of: "
        f"{', '.join([*BUILTIN, *LLM])}, or pkg.module:callable"
    )
