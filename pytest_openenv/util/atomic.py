"""Replacing a file at once: a reader sees the old content or the new, never a part.

The new content goes to a temp file beside the target (same folder, so one file
system), is flushed to disk, and takes the target's name in one ``os.replace``,
which POSIX makes atomic. Anything that goes wrong on the way (a full disk,
Ctrl-C) removes the temp file and leaves the target as it was.

Temp files are named ``.NAME.tmp-PID-RANDOM``: the pid says whose it is, the
random part keeps threads of one process (``--openenv-concurrency``), and hosts
sharing a folder, from ever writing into the same temp file.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

#: ``.NAME.tmp-PID`` (what earlier versions left) or ``.NAME.tmp-PID-RANDOM``
_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.tmp-\d+(?:-[0-9a-f]+)?")


def temp_path(path: Path) -> Path:
    """A fresh temp file name beside ``path`` for its next content."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}")


def temp_target(name: str) -> str | None:
    """The file name a temp file named ``name`` was to replace, or None if it is no temp file."""
    match = _TEMP_NAME.fullmatch(name)
    return match.group("target") if match else None


def discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


@contextlib.contextmanager
def replacing(
    path: Path, *, keep_existing: bool = False, durable: bool = True
) -> Iterator[BinaryIO]:
    """A file to write ``path``'s new content to; it becomes ``path`` when the block ends.

    If the block raises, ``path`` is untouched and the temp file is gone.
    ``keep_existing``: the first writer wins, an existing ``path`` is kept (a hard link
    creates the name only if it is absent; without hard links, a plain replace).
    ``durable``: the content is on disk (``fsync``) before it takes the name, so a power
    cut leaves the old file or the whole new one; ``False`` where a lost file costs
    nothing but doing the work again.
    """
    tmp = temp_path(path)
    try:
        with tmp.open("xb") as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if keep_existing:
            _link_if_absent(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        discard(tmp)  # after a replace it is gone already; after a link, the spare name


def write_atomically(
    path: Path, data: bytes, *, keep_existing: bool = False, durable: bool = True
) -> None:
    """``path`` holds ``data``, all at once (see ``replacing``)."""
    with replacing(path, keep_existing=keep_existing, durable=durable) as handle:
        handle.write(data)


def _link_if_absent(tmp: Path, path: Path) -> None:
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # no hard links here (some network or FAT file systems)
        if not path.exists():
            os.replace(tmp, path)
