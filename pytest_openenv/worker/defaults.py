"""What the overridable ``openenv_env`` and ``openenv_policy`` fixtures return by default.

Markers that mean "whatever this episode's spec names" (its ``openenv`` marker
over ``--openenv-*`` options over ini). The ``episode`` fixture resolves them
per episode, so the fixtures need no other fixture (each such lookup costs every
episode item), and a user's router may return one from ``for_episode`` to mean
"the default for this episode".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..episode.spec import EpisodeSpec

#: routers handing the episode on to routers: past this many, something loops
MAX_ROUTING = 8


class SuiteDefault:
    def __init__(self, what: str) -> None:
        self.what = what

    def __repr__(self) -> str:
        return f"<the {self.what} each episode's marker or --openenv-* options name>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"the default openenv_{self.what} fixture stands for each episode's own "
            f"{self.what} and has no {name!r}: use the `episode` fixture's result, or "
            f"return the default from an override or a router's for_episode(spec)"
        )


DEFAULT_ENV = SuiteDefault("env")
DEFAULT_POLICY = SuiteDefault("policy")


def resolve(candidate: Any, spec: EpisodeSpec, default: Callable[[EpisodeSpec], Any]) -> Any:
    """Follow ``for_episode`` routers and the default marker to this episode's object."""
    for _ in range(MAX_ROUTING):
        if isinstance(candidate, SuiteDefault):
            return default(spec)
        choose = getattr(candidate, "for_episode", None)
        if choose is None:
            return candidate
        candidate = choose(spec)
    raise TypeError(
        f"for_episode() of {type(candidate).__name__} led through {MAX_ROUTING} routers "
        "without reaching a policy or env factory"
    )
