"""Accept what users hand us as a policy and make it a ``Policy``."""

from __future__ import annotations

from typing import Any

from .base import Policy


def as_policy(candidate: Any) -> Policy:
    """A ``Policy`` as is; a ``Policy`` subclass instantiated; any other callable wrapped.

    The callable gets ``(messages, tools)`` (and ``turn=`` if it takes it) and
    returns a tool call; see ``policies.callable`` for the accepted shapes.
    Routers (``for_episode``) are resolved before this (``defaults.resolve``).
    """
    if isinstance(candidate, Policy):
        return candidate
    if isinstance(candidate, type) and issubclass(candidate, Policy):
        return candidate()
    if callable(candidate):
        from .callable import CallablePolicy

        return CallablePolicy(candidate)
    raise TypeError(
        "openenv_policy must return a pytest_openenv.Policy or a callable "
        f"policy(messages, tools) -> tool call, got {type(candidate).__name__}"
    )
