"""Turn ``--openenv-policy`` into a ``Policy``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from .base import Policy
from .scripted import RandomPolicy, ScriptedPolicy

if TYPE_CHECKING:
    from ..options import Settings

BUILTIN = {"scripted": ScriptedPolicy, "random": RandomPolicy}


def build_policy(name: str, settings: Settings) -> Policy:
    if name in BUILTIN:
        return BUILTIN[name]()
    raise pytest.UsageError(
        f"--openenv-policy={name!r} is unknown; choose one of: {', '.join(BUILTIN)}"
    )
