"""Whether a policy can play an env family, checked before any episode (worker side).

A policy that needs OpenSpiel's bots on a game they cannot play, or a built-in teacher
that the family cannot play honestly (a ``random`` record must never hold the oracle's
answer), is a usage error naming what would fit. It asks both a policy and a family,
so it sits above both: policies and envs never import each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..policies.base import Policy
from ..policies.registry import BUILT_IN, model_policies, teachers

if TYPE_CHECKING:
    from ..envs.base import EnvFamily


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
    if policy not in teachers():
        return
    problem = family.builtin_policy_problem(policy)
    if problem is None:
        return
    fitting = [
        name
        for name in teachers()
        if family.builtin_policy_problem(name) is None
        and not (BUILT_IN[name].wants_expert and family.expert_problem())
    ]
    choices = ", ".join([*fitting, *model_policies(), "pkg.module:callable"])
    raise pytest.UsageError(
        f"{where} cannot play {family.spec} (family {family.name!r}): {problem}. "
        f"Choose one of: {choices}"
    )
