"""Turn ``--openenv-policy`` into a ``Policy``, and check that it fits the env.

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
    from ..envs.base import EnvFamily
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
    elif ":" in name:
        from .callable import load_policy

        policy = load_policy(name)
    else:
        raise pytest.UsageError(
            f"--openenv-policy={name!r} is unknown; choose one of: "
            f"{', '.join([*BUILTIN, *LLM])}, or pkg.module:callable"
        )
    from ..util.secrets import KnownSecrets
    from .cache import wrap_with_cache

    return wrap_with_cache(policy, settings.llm, name, KnownSecrets.from_settings(settings))


def check_fits(policy: Policy, family: EnvFamily, where: str) -> None:
    """Raise ``pytest.UsageError`` if ``policy`` needs what ``family`` cannot give.

    ``where`` names the setting that chose the policy (``--openenv-policy=expert``).
    """
    if not policy.wants_expert:
        return
    problem = family.expert_problem()
    if problem is None:
        return
    offering = ", ".join(_families_with_expert()) or "none installed"
    raise pytest.UsageError(
        f"{where} cannot play {family.spec}: {problem} "
        f"(env families with an expert teacher: {offering})"
    )


def _families_with_expert() -> list[str]:
    from ..envs.registry import installed_families

    names = []
    for name, entry_point in sorted(installed_families().items()):
        try:
            offers = bool(getattr(entry_point.load(), "offers_expert", False))
        except Exception:  # a broken third-party family must not hide this message
            continue
        if offers:
            names.append(name)
    return names


def check_honoured(policy: str, family: EnvFamily, where: str) -> None:
    """Raise ``pytest.UsageError`` if ``family`` cannot play the built-in ``policy`` honestly.

    The family declares it (``EnvFamily.builtin_policy_problem``); a record that says
    ``random`` must never hold the oracle's answer.
    """
    if policy not in BUILTIN:
        return
    problem = family.builtin_policy_problem(policy)
    if problem is None:
        return
    fitting = [
        name
        for name in BUILTIN
        if family.builtin_policy_problem(name) is None
        and not (BUILTIN[name].wants_expert and family.expert_problem())
    ]
    choices = ", ".join([*fitting, *LLM, "pkg.module:callable"])
    raise pytest.UsageError(
        f"{where} cannot play {family.spec} (family {family.name!r}): {problem}. "
        f"Choose one of: {choices}"
    )
