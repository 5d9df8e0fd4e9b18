"""Text from a model or an env, made safe to print on a terminal.

A model's answer may hold escape sequences: OSC 52 writes the clipboard, ``ESC [2J``
clears the screen, OSC 0 sets the window title, a bare ``\\r`` overwrites the line before
it and bidi overrides reorder what a reader sees. Whatever pytest-openenv prints from such
text (``episode.explain()``, failure messages) shows each of those characters as a visible
escape (``\\x1b``) instead of sending it to the terminal. The rows keep the text as it was:
they are the data, and JSON escapes it.
"""

from __future__ import annotations

import re
from typing import Any

from .secrets import walk_strings

#: C0 controls but tab and newline, DEL, the C1 controls (``\\x9b`` is an 8-bit CSI), and the
#: bidi embeddings, overrides and isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character but tab and newline shown as an escape."""
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


def neutralise_report(report: Any) -> None:
    """A report's failure text (``longrepr``) safe to print; lists and dataclasses in place."""
    current = getattr(report, "longrepr", None)
    if current is None:
        return
    cleaned = walk_strings(current, terminal_safe)
    if cleaned is not current and isinstance(cleaned, (str, tuple)):
        report.longrepr = cleaned
