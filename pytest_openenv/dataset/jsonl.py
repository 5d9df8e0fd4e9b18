"""Reading ``results.jsonl``-style files safely: whole lines only, corruption located."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CorruptLine


@dataclass(frozen=True, slots=True)  # one per row at finalize: 20k rows stay small
class Row:
    key: tuple[str, str]  # (episode_id, test)
    offset: int
    length: int


def row_key(record: dict[str, Any]) -> tuple[str, str]:
    return (str(record.get("episode_id", "")), str(record.get("test", "")))


def parse_line(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptLine(path, number, f"not a JSON object ({exc})") from None
    if not isinstance(record, dict) or not isinstance(record.get("episode_id"), str):
        raise CorruptLine(path, number, "not an episode record (no string episode_id)")
    return record


def scan(
    path: Path,
    *,
    repair_torn_tail: bool,
    visit: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[Row], bool]:
    """Index every whole line of ``path``; ``visit`` sees each record (one pass for both).

    A last line without its newline is what a killed writer leaves behind: it is
    cut off (when ``repair_torn_tail``) and reported; any other bad line raises
    ``CorruptLine`` with file:line.
    """
    rows: list[Row] = []
    torn = False
    if not path.exists():
        return rows, torn
    with path.open("rb") as handle:
        offset = 0
        for number, raw in enumerate(handle, 1):
            length = len(raw)
            if not raw.endswith(b"\n"):
                try:
                    parse_line(path, number, raw)
                except CorruptLine:
                    torn = True
                    break
                # A whole record missing only its newline: keep it, terminate it on repair.
            if raw.strip():
                record = parse_line(path, number, raw)
                rows.append(Row(row_key(record), offset, length))
                if visit is not None:
                    visit(record)
            offset += length
    if torn and repair_torn_tail:
        with path.open("r+b") as handle:
            handle.truncate(offset)
    elif repair_torn_tail and rows:
        with path.open("r+b") as handle:
            handle.seek(0, 2)
            if handle.tell() > 0:
                handle.seek(-1, 2)
                if handle.read(1) != b"\n":
                    handle.write(b"\n")
    return rows, torn


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if raw.strip() and raw.endswith(b"\n"):
                yield parse_line(path, number, raw)
