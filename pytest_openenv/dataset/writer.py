"""The single writer of the output folder (controller only).

Rows are appended as reports arrive, one ``os.write`` per whole line on an
``O_APPEND`` descriptor, so a killed run leaves only whole lines. At session end
each file is rewritten sorted by episode id through a temp file and
``os.replace``, so readers never see a half-written file.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from .jsonl import Row, scan

RESULTS = "results.jsonl"
FAILURES = "failures.jsonl"
METADATA = "metadata.json"
SUMMARY = "summary.json"
CARD = "README.md"


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def move_aside(path: Path) -> Path | None:
    """Rename an earlier run's file out of the way; never delete it."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(path.stat().st_mtime))
    stem, suffix = path.name.split(".", 1)
    target = path.with_name(f"{stem}.{stamp}.{suffix}")
    counter = 1
    while target.exists():
        target = path.with_name(f"{stem}.{stamp}-{counter}.{suffix}")
        counter += 1
    os.replace(path, target)
    return target


class DatasetWriter:
    def __init__(self, folder: Path, *, resume: bool) -> None:
        self.folder = folder
        self.resume = resume
        self.results_path = folder / RESULTS
        self.failures_path = folder / FAILURES
        self.moved: list[Path] = []
        self._fds: dict[bool, int] = {}
        self.opened = False

    def open(self) -> None:
        """Called at the first episode report: before it the plugin writes nothing."""
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.resume:
            for path in (self.results_path, self.failures_path):
                moved = move_aside(path)
                if moved is not None:
                    self.moved.append(moved)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._fds[True] = os.open(self.results_path, flags, 0o644)
        self._fds[False] = os.open(self.failures_path, flags, 0o644)
        self.opened = True

    def append(self, line: str, *, passed: bool) -> None:
        if not self.opened:
            self.open()
        data = (line + "\n").encode("utf-8")
        fd = self._fds[passed]
        written = os.write(fd, data)
        while written < len(data):  # a short write on a full disk: finish the line or fail
            written += os.write(fd, data[written:])

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self.opened = False

    def finalize(self) -> None:
        """Dedupe (last row wins), drop failures that later passed, sort, replace atomically."""
        self.close()
        results, _ = scan(self.results_path, repair_torn_tail=True)
        kept = _last_per_key(results)
        _rewrite_sorted(self.results_path, kept)
        passed_keys = {row.key for row in kept}
        failures, _ = scan(self.failures_path, repair_torn_tail=True)
        failed = [row for row in _last_per_key(failures) if row.key not in passed_keys]
        _rewrite_sorted(self.failures_path, failed)

    def write_json(self, name: str, payload: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
        atomic_write(self.folder / name, text.encode("utf-8"))

    def write_text(self, name: str, text: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self.folder / name, text.encode("utf-8"))


def _last_per_key(rows: list[Row]) -> list[Row]:
    latest: dict[tuple[str, str], Row] = {}
    for row in rows:
        latest[row.key] = row
    return sorted(latest.values(), key=lambda r: r.key)


def _rewrite_sorted(path: Path, rows: list[Row]) -> None:
    """Copy lines in sorted order by offset, holding one line in memory at a time."""
    if not path.exists():
        if not rows:
            path.touch()
        return
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with path.open("rb") as source, tmp.open("wb") as target:
        for row in rows:
            source.seek(row.offset)
            line = source.read(row.length)
            target.write(line if line.endswith(b"\n") else line + b"\n")
        target.flush()
        os.fsync(target.fileno())
    os.replace(tmp, path)
