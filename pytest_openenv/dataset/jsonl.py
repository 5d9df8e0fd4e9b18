"""Reading ``results.jsonl``-style files safely: whole lines only, corruption located."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import CorruptLine, NotARegularFile

#: the longest line read as a row; a longer one (or a device's endless "line") is corrupt.
#: A row of hundreds of long turns is a few MiB.
MAX_LINE_BYTES = 64 * 1024 * 1024


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a file"


def open_regular(path: Path) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file (a symlink to one is); a device,
    FIFO or socket raises ``NotARegularFile`` before it is opened (a FIFO's open would block).
    """
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise NotARegularFile(path, _kind(mode))
    handle = path.open("rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the stat
        kind = _kind(os.fstat(handle.fileno()).st_mode)
        handle.close()
        raise NotARegularFile(path, kind)
    return handle


def bounded_lines(path: Path, handle: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """(number, line) of ``handle``, each at most ``MAX_LINE_BYTES``; a longer one raises
    ``CorruptLine`` instead of filling memory."""
    number = 0
    while raw := handle.readline(MAX_LINE_BYTES + 1):
        number += 1
        if len(raw) > MAX_LINE_BYTES:
            raise CorruptLine(path, number, f"a line longer than {MAX_LINE_BYTES} bytes")
        yield number, raw


def read_bounded(path: Path, limit: int) -> bytes:
    """A whole regular file of at most ``limit`` bytes (``summary.json``)."""
    with open_regular(path) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise CorruptLine(path, 1, f"more than {limit} bytes")
    return data


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
    with open_regular(path) as handle:
        offset = 0
        for number, raw in bounded_lines(path, handle):
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
    with open_regular(path) as handle:
        for number, raw in bounded_lines(path, handle):
            if raw.strip() and raw.endswith(b"\n"):
                yield parse_line(path, number, raw)
