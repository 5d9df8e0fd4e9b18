"""The ``reasoning_gym`` env family: any reasoning_gym dataset (``family.ReasoningGymFamily``)."""

from __future__ import annotations

from typing import Any

__all__ = ["ReasoningGymFamily"]


def __getattr__(name: str) -> Any:
    # lazy: importing the package for one of its modules must not load the engine
    if name == "ReasoningGymFamily":
        from .family import ReasoningGymFamily

        return ReasoningGymFamily
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
