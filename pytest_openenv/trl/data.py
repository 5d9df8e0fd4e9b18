"""The ``train_dataset`` of seeds for the environments ``environment_factory`` built."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import TrainingSetupError
from .environment import OpenEnvEnvironment


def _seeds(seeds: int | Iterable[int]) -> list[int]:
    found = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    bad = [seed for seed in found if isinstance(seed, bool) or not isinstance(seed, int)]
    if bad:
        raise TrainingSetupError(f"seeds must be integers; got {bad[:3]!r}")
    return found


def seed_rows(
    environment: type[OpenEnvEnvironment] | Mapping[str, type[OpenEnvEnvironment]],
    seeds: int | Iterable[int],
) -> list[dict[str, Any]]:
    """One row per seed (per env and seed for a dict of environments, with the
    ``environment`` column TRL routes by): ``prompt`` (the run's system message and the
    user message ``reset`` fills with the task) and ``seed``."""
    chosen = _seeds(seeds)
    if isinstance(environment, Mapping):
        return [
            {**row, "environment": name}
            for name, cls in environment.items()
            for row in seed_rows(cls, chosen)
        ]
    first = environment._setup.first_messages()
    return [{"prompt": [dict(m) for m in first], "seed": seed} for seed in chosen]


def seed_dataset(
    environment: type[OpenEnvEnvironment] | Mapping[str, type[OpenEnvEnvironment]],
    seeds: int | Iterable[int],
) -> Any:
    """``seed_rows`` as a ``datasets.Dataset`` (``seeds``: a count from 0, or the seeds)."""
    import datasets

    return datasets.Dataset.from_list(seed_rows(environment, seeds))
