"""The ``expert`` teacher: plays the env's expert move (exact search or OpenSpiel's bots)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..errors import PolicyUnavailable
from .base import Policy, Reply, ToolCall, Turn

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..util.overload import OverloadSignal


class ExpertPolicy(Policy):
    """Plays ``Turn.expert``; which envs have one is checked at start-up (``check_fits``)."""

    name: ClassVar[str] = "expert"
    wants_expert: ClassVar[bool] = True

    def act(self, turn: Turn) -> Reply:
        if turn.expert is None:
            raise PolicyUnavailable("this env offers no expert move; choose another policy")
        call = ToolCall.from_proposed(turn.expert, f"call_{turn.turn:03d}")
        return Reply(tool_calls=(call,))


def build_expert_policy(settings: Settings, overload: OverloadSignal | None = None) -> Policy:
    return ExpertPolicy()
