"""Accept what users hand us as a policy and make it a ``Policy``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Policy

if TYPE_CHECKING:
    from ..episode import EpisodeSpec


def as_policy(candidate: Any, spec: EpisodeSpec | None = None) -> Policy:
    """A ``Policy`` as is; a ``Policy`` subclass instantiated; any other callable wrapped.

    The callable gets ``(messages, tools)`` (and ``turn=`` if it takes it) and
    returns a tool call; see ``policies.callable`` for the accepted shapes. An
    object with ``for_episode(spec)`` (the default fixture, or a user's router
    between teachers) is asked for this episode's policy first.
    """
    choose = getattr(candidate, "for_episode", None)
    if spec is not None and choose is not None and not isinstance(candidate, Policy):
        candidate = choose(spec)
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
