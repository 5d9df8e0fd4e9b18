"""Train on the env a suite tests: TRL's GRPO with the run's prompt, tools and verdict.

- ``environment_factory(env, **options)``: the class for ``GRPOTrainer(environment_factory=)``;
- ``seed_dataset(environment, seeds)``: its ``train_dataset``;
- ``reward_func``: the run's verdict as the reward (``env_reward_func``: the env's reward);
- ``EvalCallback``: the model being trained, evaluated every N steps as a run.

Needs the ``train`` extra (``pip install 'pytest-openenv[train]'``).
"""

from __future__ import annotations

from .callback import EvalCallback
from .data import seed_dataset, seed_rows
from .environment import OpenEnvEnvironment, environment_factory
from .rewards import env_reward_func, reward_func

__all__ = [
    "EvalCallback",
    "OpenEnvEnvironment",
    "env_reward_func",
    "environment_factory",
    "reward_func",
    "seed_dataset",
    "seed_rows",
]
