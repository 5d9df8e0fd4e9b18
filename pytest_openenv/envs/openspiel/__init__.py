"""The ``openspiel`` env family: any turn-based pyspiel game (``family.OpenSpielFamily``)."""

from __future__ import annotations

from typing import Any

__all__ = ["OpenSpielFamily"]


def __getattr__(name: str) -> Any:
    # lazy: importing the package for one of its modules must not load the engine
    if name == "OpenSpielFamily":
        from .family import OpenSpielFamily

        return OpenSpielFamily
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
