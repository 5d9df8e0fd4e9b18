"""Time bounds a user may change through an environment variable (no option reaches there)."""

from __future__ import annotations

import math
import os


def seconds_from_env(name: str, default: float) -> float:
    """``$name`` as seconds > 0, or ``default`` when unset.

    Raises ``ValueError`` naming the variable, the value and a valid example.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise ValueError(
            f"{name}={raw!r} is invalid: expected a number of seconds > 0, e.g. {default:g}"
        )
    return value
