"""Policies that need no model: ``scripted`` (the env's own move) and ``random``."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, ClassVar

from ..errors import PolicyUnavailable
from .base import Policy, Reply, ToolCall, Turn

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..util.overload import OverloadSignal


def _call_id(turn: Turn) -> str:
    return f"call_{turn.turn:03d}"


class ScriptedPolicy(Policy):
    """Plays the family's scripted move: the first legal action, or the oracle answer."""

    name: ClassVar[str] = "scripted"

    def act(self, turn: Turn) -> Reply:
        if turn.scripted is None:
            raise PolicyUnavailable("this env offers no scripted move; choose another policy")
        return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, _call_id(turn)),))


class RandomPolicy(Policy):
    """Uniform over legal calls; seeded by episode seed, repeat and turn, so replays match."""

    name: ClassVar[str] = "random"
    wants_legal: ClassVar[bool] = True

    def act(self, turn: Turn) -> Reply:
        options = turn.legal or ([turn.scripted] if turn.scripted else [])
        if not options:
            raise PolicyUnavailable("this env cannot list legal calls; choose another policy")
        rng = random.Random(f"policy:{turn.seed}:{turn.repeat}:{turn.turn}")
        choice = rng.choice(options)
        return Reply(tool_calls=(ToolCall.from_proposed(choice, _call_id(turn)),))


def build_scripted_policy(settings: Settings, overload: OverloadSignal | None = None) -> Policy:
    return ScriptedPolicy()


def build_random_policy(settings: Settings, overload: OverloadSignal | None = None) -> Policy:
    return RandomPolicy()
