"""The output folder of a run: checked at start, claimed before the first episode, released.

One run per folder, and only a folder that is ours (issue 14): claiming refuses a
foreign or busy folder and a resume that does not match, then holds the folder's
lock, moves an earlier run's files aside (without ``--openenv-resume``) and records
the run in ``metadata.json``. Rows are appended as reports arrive; the first write
that fails ends the run (``save``). A folder made for a run that wrote no row is
removed again at release.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from ..config.settings import Settings, check_output_writable
from ..dataset.folder import LOCK, ownership_problem, read_metadata
from ..dataset.identity import resume_problem
from ..dataset.jsonl import CorruptLine, scan
from ..dataset.lock import FolderLocked, RunLock
from ..dataset.writer import METADATA, DatasetWriter
from ..util.secrets import KnownSecrets
from .metadata import RunMetadata


class Row(NamedTuple):
    """One episode's line for results.jsonl (passed) or failures.jsonl."""

    line: str
    passed: bool
    #: (episode id, node id): what finalize() sorts and de-duplicates by
    key: tuple[str, str]


def folder_in_use(folder: Path, holder: str) -> str:
    return (
        f"--openenv-output={str(folder)!r} is in use by another run ({holder}): two runs "
        "writing one folder would mix their rows. Wait for it to end or pass another "
        f"--openenv-output; if that run is gone, delete {folder / LOCK}"
    )


def read_resume_set(settings: Settings) -> tuple[set[str], bool]:
    """Node ids already in results.jsonl; repairs a torn last line (older crash)."""
    path = settings.output.folder / "results.jsonl"
    holder = RunLock(settings.output.folder / LOCK).live_holder()
    if holder is not None:  # its last line may be half-written now: repair nothing
        raise pytest.UsageError(folder_in_use(settings.output.folder, holder))
    try:
        rows, torn = scan(path, repair_torn_tail=True)
    except CorruptLine as exc:
        raise pytest.UsageError(
            f"--openenv-resume cannot read {exc.path}:{exc.line}: {exc}. Fix or move that "
            "file, or run without --openenv-resume (the file is then moved aside, not deleted)"
        ) from None
    except OSError as exc:  # e.g. results.jsonl is a directory, or unreadable
        raise pytest.UsageError(
            f"--openenv-resume cannot read {path}: {exc.strerror or exc}. It must be the "
            "results.jsonl file of an earlier run: move it away or pass another --openenv-output"
        ) from None
    return {row.key[1] for row in rows}, torn


def earlier_passes(settings: Settings) -> dict[str, dict[str, Any]]:
    """--openenv-resume: what the gate and card need of each row already in results.jsonl."""
    from ..dataset.jsonl import iter_records

    earlier: dict[str, dict[str, Any]] = {}
    for row in iter_records(settings.output.folder / "results.jsonl"):
        metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
        earlier[str(row.get("test", ""))] = {
            "reward": row.get("reward"),
            "turns": metrics.get("turns"),
            "env": row.get("env"),
            "policy": row.get("policy"),
            "model": row.get("model"),
            # the paired tests of several models pair earlier episodes too (issue 24)
            "seed": row.get("seed"),
            "repeat": (row.get("extra") or {}).get("repeat", 0),
        }
    return earlier


class OutputFolder:
    def __init__(
        self, config: pytest.Config, settings: Settings, secrets: KnownSecrets, notes: list[str]
    ) -> None:
        """Check the folder can be used (writes nothing) and read the resume set."""
        self.config = config
        self.settings = settings
        self.folder = settings.output.folder
        #: the controller's notes for the summary (a lock taken over, a card kept)
        self.notes = notes
        check_output_writable(self.folder)
        #: --openenv-resume: node ids already in results.jsonl (their items are skipped)
        self.resumed: frozenset[str] = frozenset()
        if settings.output.resume:
            done, torn = read_resume_set(settings)
            self.resumed = frozenset(done)
            if torn:
                config.issue_config_time_warning(
                    pytest.PytestWarning(
                        f"{self.folder / 'results.jsonl'} ended in a torn line (an earlier run "
                        "was killed mid-write); the partial line was removed and will be re-run"
                    ),
                    stacklevel=2,
                )
        self.writer = DatasetWriter(self.folder, resume=settings.output.resume, secrets=secrets)
        self.lock = RunLock(self.folder / LOCK)
        self.claimed = False
        self.created_folder = False
        #: the first write that failed, if one did: the run stopped there
        self.write_error: str | None = None
        #: finished episodes that could not be written
        self.unsaved = 0

    def claim(self, run: RunMetadata) -> None:
        """Before any episode: refuse a foreign or busy folder, or a mismatched resume.

        Then hold the folder (lock), move an earlier run's files aside (without
        resume) and record this run's identity and marker in metadata.json.
        """
        if self.claimed or self.config.option.collectonly:
            return
        folder = self.folder
        # what this run writes itself may sit inside the output folder
        invoked = Path(self.config.invocation_params.dir)
        own_paths = [
            invoked / path
            for path in (self.settings.llm.cache, self.config.getoption("xmlpath", None))
            if path
        ]
        problem = ownership_problem(folder, own_paths)
        if problem is not None:
            raise pytest.UsageError(problem)
        try:
            if not folder.exists():
                folder.mkdir(parents=True)
                self.created_folder = True
            self.lock.acquire()
        except FolderLocked as exc:
            self.release(wrote=False)
            raise pytest.UsageError(folder_in_use(folder, str(exc))) from None
        except OSError as exc:
            self.release(wrote=False)
            raise pytest.UsageError(
                f"--openenv-output={str(folder)!r} cannot be locked for this run: {exc}"
            ) from None
        self.claimed = True
        if self.lock.took_over is not None:
            self.warn(
                f"{self.lock.path}: the run that held this folder "
                f"({self.lock.took_over.describe()}) ended without releasing it; "
                "this run took it over"
            )
        if self.settings.output.resume:
            mismatch = resume_problem(folder, read_metadata(folder), run.identity())
            if mismatch is not None:
                self.release(wrote=False)
                raise pytest.UsageError(mismatch)
        try:
            self.writer.move_earlier_run_aside()
            self.writer.write_json(METADATA, run.to_json(finished=False))
        except OSError as exc:
            self.release(wrote=False)
            raise pytest.UsageError(
                f"--openenv-output={str(folder)!r} is not writable: {exc}"
            ) from None

    def save(self, row: Row) -> str | None:
        """Append ``row``; the error, when this is the write that first failed."""
        if self.write_error is not None:
            self.unsaved += 1
            return None
        try:
            self.writer.append(row.line, passed=row.passed, key=row.key)
        except OSError as exc:
            self.unsaved += 1
            why = exc.strerror or str(exc)
            self.write_error = f"cannot write to {self.writer.path_of(row.passed)}: {why}"
            return self.write_error
        return None

    def release(self, *, wrote: bool) -> None:
        """Let the folder go; ``wrote``: this run reported an episode (else leave no trace)."""
        if self.lock.held:
            self.lock.release()
        self.claimed = False
        if self.created_folder and not wrote:
            # made for a run that wrote nothing but its metadata: leave no trace
            for name in (METADATA,):
                with contextlib.suppress(OSError):
                    (self.folder / name).unlink()
            with contextlib.suppress(OSError):
                self.folder.rmdir()  # only if empty
            self.created_folder = False

    def warn(self, message: str) -> None:
        self.notes.append(f"WARNING: {message}")
        self.config.issue_config_time_warning(pytest.PytestWarning(message), stacklevel=2)
