"""The single writer of the output folder (controller only).

Rows are appended as reports arrive, one ``os.write`` per whole line on an
``O_APPEND`` descriptor, so a killed run leaves only whole lines. At session end
each file is rewritten sorted by episode id and replaced at once
(``util/atomic.py``), so readers never see a half-written file.

Every text written goes through ``KnownSecrets.scrub`` (``secrets.py``): whatever
an env server or a model echoed back of a key or password is hidden here, the
one place all files of the folder are written from.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.convert import INSPECT_LOGS_DEFAULT
from ..util.atomic import discard, replacing, temp_target, write_atomically
from ..util.secrets import KnownSecrets
from .jsonl import Row, scan

RESULTS = "results.jsonl"
FAILURES = "failures.jsonl"
METADATA = "metadata.json"
SUMMARY = "summary.json"
CARD = "README.md"
#: the run report (report/page/) and the card's chart, rewritten at every session end
REPORT = "report.html"
CHART = "pass-rate.svg"
#: preference pairs for DPO (dataset/preferences.py), with repeats or several models
PREFERENCES = "preferences.jsonl"
#: --openenv-inspect-log's default folder: one inspect eval log per group
INSPECT_LOGS = INSPECT_LOGS_DEFAULT
#: what an earlier run leaves that a new run (without --openenv-resume) moves aside: its
#: data, and the card and report that describe it (left in place, a run killed before its
#: end would show the old card beside the new metadata)
EARLIER_RUN = (RESULTS, FAILURES, METADATA, SUMMARY, REPORT, CHART, PREFERENCES, INSPECT_LOGS)

#: told of every row appended with its key, as written (secrets scrubbed): (line, passed,
#: key, the dict the line is the JSON of when the writer was handed it, else None)
RowObserver = Callable[[str, bool, tuple[str, str], dict[str, Any] | None], None]

#: the files a run replaces whole (``util/atomic.py``), so whose temp files are ours
REPLACED = frozenset((RESULTS, FAILURES, METADATA, SUMMARY, CARD, REPORT, CHART, PREFERENCES))


def is_temp_name(name: str) -> bool:
    """A temp file of ours: one of the folder's files being replaced."""
    return temp_target(name) in REPLACED


def remove_stale_temps(folder: Path) -> None:
    """Temp files of an earlier run killed mid-rewrite (the file they replace is intact).

    Only our own names: another program's dot-files in the folder are not ours to delete.
    """
    with contextlib.suppress(OSError):
        for stale in folder.glob(".*.tmp-*"):
            if is_temp_name(stale.name):
                discard(stale)


def followed(path: Path) -> Path:
    """Where a file of the folder really is: a symlinked one is written through its link.

    A ``results.jsonl`` linked to a bigger disk gets its rows appended there; replacing
    the name itself at the end would turn the link into a file and leave the target
    behind, unsorted. So the target is replaced and the link stays a link.
    """
    try:
        return path.resolve(strict=True) if path.is_symlink() else path
    except OSError:  # a dangling or looping link: write the name itself
        return path


def same_file(fd: int, path: Path) -> bool:
    try:
        held, named = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def copy_out(fd: int, path: Path) -> None:
    """Write everything an open descriptor holds to ``path`` (which need not be its name)."""
    with replacing(path) as target:
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            target.write(chunk)
            offset += len(chunk)


def sibling_folder(folder: Path, label: str) -> Path:
    target = folder.with_name(f"{folder.name}.{label}")
    counter = 1
    while target.exists():
        target = folder.with_name(f"{folder.name}.{label}-{counter}")
        counter += 1
    return target


def move_aside(path: Path) -> Path | None:
    """Rename an earlier run's file (or folder of inspect logs) out of the way; never delete it."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(path.stat().st_mtime))
    stem, _, suffix = path.name.partition(".")
    suffix = f".{suffix}" if suffix else ""
    target = path.with_name(f"{stem}.{stamp}{suffix}")
    counter = 1
    while target.exists():
        target = path.with_name(f"{stem}.{stamp}-{counter}{suffix}")
        counter += 1
    os.replace(path, target)
    return target


class DatasetWriter:
    def __init__(
        self,
        folder: Path,
        *,
        resume: bool,
        secrets: KnownSecrets | None = None,
        observer: RowObserver | None = None,
    ) -> None:
        self.folder = folder
        #: what else keeps a digest of each row as it is written (the run report's table)
        self.observer = observer
        #: after finalize(): each file's rows as they now lie in it (key, offset, length),
        #: when every one of them was appended by this run; None: read the files instead
        self.final: dict[bool, list[Row]] | None = None
        self.resume = resume
        self.secrets = secrets or KnownSecrets()
        self.results_path = folder / RESULTS
        self.failures_path = folder / FAILURES
        self.moved: list[Path] = []
        self._fds: dict[bool, int] = {}
        #: rows appended this run, per file, while they are all we need to know about it
        #: (the file started empty and every row came with its key); None: scan it instead
        self._index: dict[bool, list[Row] | None] = {}
        self._sizes: dict[bool, int] = {}
        self.opened = False
        #: set when the folder or its files vanished mid-run and the rows were written back
        self.restored: list[Path] = []
        #: files whose final sorted rewrite failed (a full disk), with why: every row is
        #: still in them, in the order it arrived
        self.unsorted: list[tuple[Path, str]] = []

    def move_earlier_run_aside(self, *, card: bool) -> None:
        """Without --openenv-resume: an earlier run's files are renamed, never overwritten.

        ``card``: the card is a generated one (a hand-edited card stays where it is).
        """
        if self.resume:
            return
        for name in (*EARLIER_RUN, *((CARD,) if card else ())):
            moved = move_aside(self.folder / name)
            if moved is not None:
                self.moved.append(moved)

    def open(self) -> None:
        """Called at the first episode report: before it the plugin writes nothing."""
        self.folder.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.folder)
        if not self.resume:
            for path in (self.results_path, self.failures_path):
                moved = move_aside(path)
                if moved is not None:
                    self.moved.append(moved)
        # Read access too: if the folder is deleted mid-run the rows survive in these
        # descriptors, and finalize() writes them back (see restore_if_lost).
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
        self._fds[True] = os.open(self.results_path, flags, 0o644)
        self._fds[False] = os.open(self.failures_path, flags, 0o644)
        for passed, fd in self._fds.items():
            self._sizes[passed] = size = os.fstat(fd).st_size
            self._index[passed] = [] if size == 0 else None
        self.opened = True

    def append(
        self,
        line: str,
        *,
        passed: bool,
        key: tuple[str, str] | None = None,
        parsed: dict[str, Any] | None = None,
    ) -> None:
        """Append one row; ``key`` (episode id, test) spares finalize() re-reading the file;
        ``parsed``: what ``json.loads(line)`` gives, for the observer (a
        one-process run's ``EpisodeOutcome.row``)."""
        if not self.opened:
            self.open()
        if self.secrets.active:
            line = self.secrets.scrub(line)
            parsed = None  # the dict holds the text as it was
        data = (line + "\n").encode("utf-8")
        fd = self._fds[passed]
        written = 0
        try:
            written = os.write(fd, data)
            while written < len(data):  # a short write on a full disk: finish the line or fail
                written += os.write(fd, data[written:])
        except OSError:
            if written:  # cut the part-line off again: the file keeps only whole lines
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, os.fstat(fd).st_size - written)
            self._index[passed] = None
            raise
        index = self._index[passed]
        if index is not None:
            if key is None:
                self._index[passed] = None
            else:
                index.append(Row(key, self._sizes[passed], len(data)))
                if self.observer is not None:
                    self.observer(line, passed, key, parsed)
        self._sizes[passed] += len(data)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self.opened = False

    def restore_if_lost(self) -> None:
        """Write rows back if the folder or a file in it was deleted or replaced mid-run.

        Our descriptors still hold every row written; a folder that is now a file sends
        them to a sibling folder instead (``DIR.recovered``), and so does the rest.
        """
        lost = [passed for passed, fd in self._fds.items() if not same_file(fd, self._path(passed))]
        if not lost:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            self._move_to(sibling_folder(self.folder, "recovered"))
            self.folder.mkdir(parents=True)
            lost = list(self._fds)
        for passed in lost:
            path = self._path(passed)
            moved = move_aside(path)  # whatever now sits at our path is kept, not overwritten
            if moved is not None:
                self.moved.append(moved)
            copy_out(self._fds[passed], path)
            self.restored.append(path)

    def path_of(self, passed: bool) -> Path:
        """The file a row goes to (for messages)."""
        return self._path(passed)

    def _path(self, passed: bool) -> Path:
        return self.results_path if passed else self.failures_path

    def _move_to(self, folder: Path) -> None:
        self.folder = folder
        self.results_path = folder / RESULTS
        self.failures_path = folder / FAILURES

    def finalize(self) -> None:
        """Dedupe (last row wins), drop failures that later passed, sort, replace atomically."""
        if self.opened:
            self.restore_if_lost()
            if self.restored:
                self._index.clear()  # written back from our descriptors: read what is there
            for passed, fd in self._fds.items():
                self._drop_index_if_behind(passed, fd)
        # every row of both files is this run's and known (no scan, nothing written back)
        known = all(self._index.get(passed) is not None for passed in (True, False))
        results = self._rows(True)
        kept = _last_per_key(results)
        self._rewrite(True, kept, unchanged=kept == results)
        passed_keys = {row.key for row in kept}
        failures = self._rows(False)
        failed = [row for row in _last_per_key(failures) if row.key not in passed_keys]
        self._rewrite(False, failed, unchanged=failed == failures)
        self.close()
        if known and not self.unsorted:
            self.final = {True: _laid_end_to_end(kept), False: _laid_end_to_end(failed)}

    def _drop_index_if_behind(self, passed: bool, fd: int) -> None:
        """Read the file instead of the index when the file holds more than it counts.

        A Ctrl-C can land between a row's write and its bookkeeping: the line is on disk but
        not in the index, which would drop it from the sorted rewrite or leave it unsorted.
        """
        try:
            size = os.fstat(fd).st_size
        except OSError:
            size = -1
        if size != self._sizes.get(passed):
            self._index[passed] = None

    def _rewrite(self, passed: bool, rows: list[Row], *, unchanged: bool) -> None:
        """The sorted rewrite; one that fails leaves the file whole, as appended (noted).

        A file that keeps its appended rows is synced to disk; a rewritten one replaces
        it only once its own copy is (``util/atomic.py``), so syncing the first is moot."""
        path = self._path(passed)
        try:
            _rewrite_sorted(path, rows, unchanged=unchanged)
        except OSError as exc:
            self.unsorted.append((path, exc.strerror or str(exc)))
            self._sync(passed)
        else:
            if unchanged:
                self._sync(passed)

    def _sync(self, passed: bool) -> None:
        fd = self._fds.get(passed)
        if fd is not None:
            with contextlib.suppress(OSError):  # durability only; the rows are written
                os.fsync(fd)

    def _rows(self, passed: bool) -> list[Row]:
        index = self._index.get(passed)
        if index is not None:
            return index
        rows, _ = scan(self._path(passed), repair_torn_tail=True)
        return rows

    def row_counts(self) -> dict[str, int] | None:
        """Rows in results.jsonl and failures.jsonl after finalize(), when known without
        reading them."""
        if self.final is None:
            return None
        return {RESULTS: len(self.final[True]), FAILURES: len(self.final[False])}

    def write_json(self, name: str, payload: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps(payload, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
        self.write_text(name, text)

    def write_text(self, name: str, text: str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = followed(self.folder / name)
        write_atomically(path, self.secrets.scrub(text).encode("utf-8"))


def _last_per_key(rows: list[Row]) -> list[Row]:
    latest: dict[tuple[str, str], Row] = {}
    for row in rows:
        latest[row.key] = row
    return sorted(latest.values(), key=lambda r: r.key)


def _laid_end_to_end(rows: list[Row]) -> list[Row]:
    """The rows at the offsets a file holding just them, in this order, has them."""
    laid, offset = [], 0
    for row in rows:
        laid.append(Row(row.key, offset, row.length))
        offset += row.length
    return laid


def _rewrite_sorted(path: Path, rows: list[Row], *, unchanged: bool = False) -> None:
    """Copy lines in sorted order by offset, holding one line in memory at a time.

    ``unchanged``: the file already holds exactly ``rows`` in this order (a run
    without xdist appends in order), so there is nothing to rewrite.
    """
    if not path.exists():
        if not rows:
            path.touch()
        return
    if unchanged:
        return
    # on any failure the unsorted original stays whole and readable
    with path.open("rb") as source, replacing(followed(path)) as target:
        for row in rows:
            source.seek(row.offset)
            line = source.read(row.length)
            target.write(line if line.endswith(b"\n") else line + b"\n")
