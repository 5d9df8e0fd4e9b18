"""Server-sent events as the official APIs frame them."""

from __future__ import annotations

import json
from typing import Any


def event(data: Any, name: str | None = None) -> bytes:
    """One event: ``event: NAME`` (Anthropic and Responses name theirs), then its data."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n".encode()
