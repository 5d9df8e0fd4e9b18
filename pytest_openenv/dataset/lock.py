"""One run per output folder: ``DIR/.openenv.lock``, held by the controller for the run.

Two runs appending to one ``results.jsonl`` would interleave their rows, and each
would rewrite the file at its end with what it alone knows. So the controller
takes an exclusive ``flock`` on the lock file before any episode and keeps it to
the end of the session; xdist workers never touch it. The file names the holder
(pid, host, start time) so a refused run can say who has the folder.

The kernel drops a ``flock`` when its process dies, however it dies, so a lock
left by a killed run is free: the next run takes it over and warns. Only a live
holder refuses.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import FolderLocked


@dataclass(frozen=True)
class Holder:
    pid: int | None
    host: str | None
    started_at: str | None

    @classmethod
    def parse(cls, raw: bytes) -> Holder:
        try:
            data: Any = json.loads(raw)
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        pid = data.get("pid")
        return cls(
            pid=pid if isinstance(pid, int) else None,
            host=str(data["host"]) if data.get("host") else None,
            started_at=str(data["started_at"]) if data.get("started_at") else None,
        )

    def describe(self) -> str:
        pid = self.pid if self.pid is not None else "unknown"
        host = self.host or "an unknown host"
        since = f", started {self.started_at}" if self.started_at else ""
        return f"pid {pid} on {host}{since}"

    @property
    def known(self) -> bool:
        return self.pid is not None


def this_host() -> str:
    return socket.gethostname()


class RunLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        #: the earlier run whose lock was taken over (it ended without releasing)
        self.took_over: Holder | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock or raise ``FolderLocked`` naming the live holder."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._read_holder(fd)
                os.close(fd)
                raise FolderLocked(holder.describe()) from None
            except BaseException:
                os.close(fd)
                raise
            if self._still_named(fd):
                break
            # released and removed between our open and our flock: lock the new file
            os.close(fd)
        earlier = Holder.parse(_read_all(fd))
        if earlier.known:
            self.took_over = earlier
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        payload = {"pid": os.getpid(), "host": this_host(), "started_at": stamp}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(payload) + "\n").encode("utf-8"), 0)
        self._fd = fd

    def live_holder(self) -> str | None:
        """Who holds the lock now (without taking it), or None when nobody does."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._read_holder(fd).describe()
        except OSError:
            return None
        finally:
            os.close(fd)  # drops our probe's shared lock too
        return None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if self._still_named(fd):
                os.unlink(self.path)  # while still locked: nobody can hold the old inode
        with contextlib.suppress(OSError):
            os.close(fd)  # drops the flock

    def _still_named(self, fd: int) -> bool:
        try:
            held, named = os.fstat(fd), os.stat(self.path)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)

    def _read_holder(self, fd: int) -> Holder:
        # the holder writes its name right after locking: give it a moment to appear
        for _ in range(20):
            holder = Holder.parse(_read_all(fd))
            if holder.known:
                return holder
            time.sleep(0.01)
        return holder


def _read_all(fd: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(fd, 65536, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)
