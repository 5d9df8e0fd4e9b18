"""On xdist workers: syrupy's snapshot writes one worker at a time, where syrupy does not.

Each worker writes its snapshots when its session ends, and for a module's shared ``.ambr``
file that is a read, a merge and a rewrite: two workers updating the same file at once keep
only one worker's updates, and pytest still reports every snapshot updated. syrupy 7
locks those writes itself under xdist; it needs Python 3.11, so a Python 3.10 run gets
syrupy 6 or older. There each worker's session end, where syrupy writes, holds an
exclusive lock on a file its run's workers share (``fcntl.flock``; where the platform has
no ``fcntl``, nothing is locked, as before).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

#: under this name on each worker's plugin manager
NAME = "openenv-snapshot-writes"


def syrupy_locks_its_writes() -> bool:
    """Whether the installed syrupy serializes its own writes under xdist (syrupy 7)."""
    try:
        utils = importlib.import_module("syrupy.utils")
    except ImportError:
        return True  # no syrupy: nothing to serialize
    return hasattr(utils, "should_use_snapshot_file_lock")


def lock_path(config: pytest.Config) -> Path:
    """One file per project (its root folder), not per run: the temp folder keeps one small
    file where per-run names would pile up, and two runs of one project only queue."""
    root = hashlib.sha256(str(config.rootpath).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"pytest-openenv-snapshot-writes-{root}.lock"


@contextlib.contextmanager
def exclusive(path: Path) -> Generator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: syrupy's own lock (syrupy 7) is the only one there
        yield
        return
    handle: IO[Any] = path.open("a")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # closing the file releases the lock


class SnapshotWrites:
    """A worker's session end under the run's lock, around syrupy's write."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self) -> Generator[None, object, object]:
        with exclusive(self.path):
            return (yield)


def register_if_needed(config: pytest.Config) -> None:
    """On an xdist worker of a ``--snapshot-update`` run whose syrupy does not lock."""
    if not hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("syrupy"):
        return
    if not config.getoption("update_snapshots", False) or syrupy_locks_its_writes():
        return
    config.pluginmanager.register(SnapshotWrites(lock_path(config)), NAME)
