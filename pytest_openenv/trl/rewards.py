"""TRL reward functions reading the environments ``environment_factory`` built.

TRL calls a reward function with the batch's environment instances (``environments``),
one per completion, after their rollouts ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def reward_func(environments: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """1.0 where the episode passed and 0.0 where it failed, by the verdict a run gives it.

    The rule is the family's unless ``environment_factory`` was given ``min_reward`` (then
    reward >= it): openspiel passes a non-loss (reward >= 0), reasoning_gym a fully correct
    answer (score >= 1), a generic OpenEnv server a positive reward or the outcome it
    states; each instance's ``rule`` says it in words. An episode that ended without being
    finished (the model stopped calling tools, the turn limit came) fails. None where the
    episode errored (a fault outside the model): TRL leaves that completion's reward out.
    """
    verdicts = [environment.passed for environment in environments]
    return [None if passed is None else float(passed) for passed in verdicts]


def env_reward_func(environments: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """The env's own total reward for each episode (None where it errored)."""
    return [environment.reward for environment in environments]
