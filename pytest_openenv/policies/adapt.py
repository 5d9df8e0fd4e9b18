"""Accept what users hand us as a policy and make it a ``Policy``."""

from __future__ import annotations

from typing import Any

from .base import Policy


def as_policy(candidate: Any) -> Policy:
    if isinstance(candidate, Policy):
        return candidate
    raise TypeError(
        f"openenv_policy must return a pytest_openenv.Policy, got {type(candidate).__name__}"
    )
