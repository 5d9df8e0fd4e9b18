"""Turn ``--openenv-policy`` into a ``Policy``.

``scripted`` and ``random`` need no model; ``openai`` and ``anthropic`` call a
hosted model (or any OpenAI-compatible endpoint); ``pkg.module:callable`` loads
a user's function. ``--openenv-cache`` wraps the model-backed ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .base import Policy
from .scripted import RandomPolicy, ScriptedPolicy

if TYPE_CHECKING:
    from ..options import Settings

BUILTIN = {"scripted": ScriptedPolicy, "random": RandomPolicy}
LLM = ("openai", "anthropic")


def build_policy(name: str, settings: Settings) -> Policy:
    if settings.extra.get("replay") and not settings.extra.get("cache"):
        raise pytest.UsageError(
            "--openenv-replay needs --openenv-cache DIR (the recorded responses to replay)"
        )
    if name in BUILTIN:
        return BUILTIN[name]()
    if name in LLM:
        from .llm import build_llm_policy

        policy: Policy = build_llm_policy(name, settings.extra)
    elif ":" in name:
        from .callable import load_policy

        policy = load_policy(name)
    else:
        raise pytest.UsageError(
            f"--openenv-policy={name!r} is unknown; choose one of: "
            f"{', '.join([*BUILTIN, *LLM])}, or pkg.module:callable"
        )
    from .cache import wrap_with_cache

    return wrap_with_cache(policy, settings.extra, name)
