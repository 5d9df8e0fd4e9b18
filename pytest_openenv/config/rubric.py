"""``--openenv-judge-rubric TEXT`` or ``@FILE``: the rubric a judge model decides by.

Read once, when the options are read, so every process judges by the same text and a
missing file is a usage error before any episode (not an error in every item).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

#: a rubric past this is a wrong file (a dataset, a binary), not a rubric
MAX_RUBRIC_CHARS = 100_000


def rubric_text(flag: str, raw: Any) -> str | None:
    """The rubric: the text as given, or the contents of the file ``@FILE`` names."""
    value = str(raw)
    if not value.startswith("@"):
        text = value
        where = f"--openenv-{flag}"
    else:
        path = Path(os.path.expanduser(value[1:]))
        where = f"--openenv-{flag}={value}"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise pytest.UsageError(
                f"{where}: cannot read the rubric file {str(path)!r} "
                f"({type(exc).__name__}: {exc}); pass a UTF-8 text file as @FILE, or the "
                "rubric itself as text"
            ) from None
    if not text.strip():
        raise pytest.UsageError(
            f"{where}: the rubric is empty; give what a passing episode must show, as text or "
            "as @FILE"
        )
    if len(text) > MAX_RUBRIC_CHARS:
        raise pytest.UsageError(
            f"{where}: the rubric has {len(text):,} characters, over {MAX_RUBRIC_CHARS:,}; a "
            "rubric is a few paragraphs (is @FILE the right file?)"
        )
    return text
