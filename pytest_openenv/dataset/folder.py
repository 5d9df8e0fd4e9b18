"""Which files of an output folder are ours, and whether a folder may be written at all.

The plugin writes only these names (docs/files-and-schema.md) and nothing else:

- ``results.jsonl``, ``failures.jsonl``, ``metadata.json``, ``summary.json``,
  ``README.md`` (the dataset card), ``report.html`` (the run report),
  ``pass-rate.svg`` (the card's chart), ``preferences.jsonl`` (preference pairs) and
  the folder ``inspect-logs/`` (``--openenv-inspect-log``'s default);
- an earlier run's files moved aside: ``results.20250101T120000.jsonl``
  (``-1``, ``-2`` ... on a clash), likewise ``failures``, ``metadata``, ``summary``, the
  generated card ``README``, ``report``, ``pass-rate``, ``preferences`` and
  ``inspect-logs`` (an earlier run's card and report
  describe its data, so they go aside with it);
- ``.openenv.lock`` while a run holds the folder, and ``.<name>.tmp-<pid>-<random>`` while
  one of those files is being replaced.

A folder is ours when it holds nothing else and its ``metadata.json``, if any,
carries ``"written_by": "pytest-openenv"`` (``"tool"`` in folders of earlier
versions). Anything else (a project's README, a stray file, a sub-folder) makes
it foreign, and the run refuses it before any episode: writing there would
overwrite or mix with files that are not ours. A ``README.md`` without the card's
generated marker in a folder that is ours is a hand-edited card: kept as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .card import GENERATED_MARKER
from .writer import (
    CARD,
    CHART,
    FAILURES,
    INSPECT_LOGS,
    METADATA,
    PREFERENCES,
    REPORT,
    RESULTS,
    SUMMARY,
    is_temp_name,
)

WRITTEN_BY = "pytest-openenv"
#: bump when the folder layout changes in a way an older reader must refuse
FOLDER_FORMAT = 1
LOCK = ".openenv.lock"
MARKER = {"written_by": WRITTEN_BY, "folder_format": FOLDER_FORMAT}

OWNED_NAMES = frozenset(
    (RESULTS, FAILURES, METADATA, SUMMARY, CARD, REPORT, CHART, PREFERENCES, LOCK)
)
_BACKUP = re.compile(
    r"(?:(?:results|failures|preferences)\.\d{8}T\d{6}(?:-\d+)?\.jsonl"
    r"|(?:metadata|summary)\.\d{8}T\d{6}(?:-\d+)?\.json"
    r"|README\.\d{8}T\d{6}(?:-\d+)?\.md|report\.\d{8}T\d{6}(?:-\d+)?\.html"
    r"|pass-rate\.\d{8}T\d{6}(?:-\d+)?\.svg)"
)
#: the one folder of ours: --openenv-inspect-log's logs, and an earlier run's moved aside
_OWNED_FOLDER = re.compile(re.escape(INSPECT_LOGS) + r"(?:\.\d{8}T\d{6}(?:-\d+)?)?")
#: at most this many foreign names in a message
SHOWN = 8


def is_our_name(name: str) -> bool:
    return name in OWNED_NAMES or bool(_BACKUP.fullmatch(name)) or is_temp_name(name)


def read_metadata(folder: Path) -> dict[str, Any] | None:
    """``metadata.json`` as a dict; None when absent, unreadable or not an object."""
    try:
        value = json.loads((folder / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def unreadable_metadata(folder: Path) -> str | None:
    """Why ``metadata.json`` is there but says nothing (not JSON, truncated), or None."""
    try:
        raw = (folder / METADATA).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        if not raw.strip():
            return "it is empty"
        return f"it is not whole JSON, as a file cut short would be ({exc})"
    return None if isinstance(value, dict) else "it is not a JSON object"


def metadata_is_ours(metadata: dict[str, Any] | None) -> bool:
    if metadata is None:
        return False
    return WRITTEN_BY in (metadata.get("written_by"), metadata.get("tool"))


def card_is_generated(folder: Path) -> bool:
    try:
        return GENERATED_MARKER in (folder / CARD).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def entries_for(folder: Path, paths: Iterable[Path | str | None]) -> set[str]:
    """The entries of ``folder`` that hold these paths (a cache or JUnit file put inside it)."""
    names = set()
    for path in paths:
        if not path:
            continue
        try:
            inside = Path(path).resolve().relative_to(folder.resolve())
        except (OSError, ValueError):
            continue
        if inside.parts:
            names.add(inside.parts[0])
    return names


def foreign_entries(folder: Path, also_ours: Iterable[Path | str | None] = ()) -> list[str]:
    """What in ``folder`` we did not write (empty for a missing, empty or own folder).

    ``also_ours``: paths this run is told to write (``--openenv-cache``, ``--junitxml``);
    put inside the output folder they do not make it foreign.
    """
    try:
        names = sorted(entry.name for entry in folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    allowed = entries_for(folder, also_ours)
    foreign = []
    for name in names:
        path = folder / name
        if name in allowed:
            continue
        if _OWNED_FOLDER.fullmatch(name) and path.is_dir() and not path.is_symlink():
            continue
        if not is_our_name(name) or (path.is_dir() and not path.is_symlink()):
            foreign.append(f"{name}/" if path.is_dir() else name)
    ours = metadata_is_ours(read_metadata(folder))
    if METADATA in names and not ours and unreadable_metadata(folder) is None:
        foreign.append(f"{METADATA} (not written by {WRITTEN_BY})")
    if CARD in names and not ours and not card_is_generated(folder):
        foreign.append(f"{CARD} (not a dataset card written by {WRITTEN_BY})")
    return foreign


def ownership_problem(folder: Path, also_ours: Iterable[Path | str | None] = ()) -> str | None:
    """Why the run must not write to ``folder``, or None when it may."""
    foreign = foreign_entries(folder, also_ours)
    damaged = unreadable_metadata(folder) if (folder / METADATA).exists() else None
    if damaged is not None and not foreign:
        # every name is ours, but the one file that says who wrote the folder says nothing
        return (
            f"--openenv-output={str(folder)!r}: its {METADATA} is damaged ({damaged}), so "
            "it does not say which run wrote this folder. If a pytest-openenv run did, "
            f"restore {METADATA} or delete it (with --openenv-resume every row in "
            "results.jsonl is still checked against this run); otherwise pass another "
            "--openenv-output"
        )
    if not foreign:
        return None
    shown = ", ".join(foreign[:SHOWN])
    more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
    return (
        f"--openenv-output={str(folder)!r} holds files pytest-openenv did not write: "
        f"{shown}{more}. The plugin writes only into an empty or new folder, or one an "
        f'earlier run wrote (its metadata.json says "written_by": "{WRITTEN_BY}"); '
        "pass another --openenv-output, e.g. openenv-results"
    )
