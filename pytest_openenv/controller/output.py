"""The output folder of a run: checked at start, claimed before the first episode, released.

One run per folder, and only a folder that is ours: claiming refuses a
foreign or busy folder and a resume that does not match, then holds the folder's
lock, moves an earlier run's files aside (without ``--openenv-resume``) and records
the run in ``metadata.json``. Rows are appended as reports arrive; the first write
that fails ends the run (``save``). A folder made for a run that wrote no row is
removed again at release.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import pytest

from ..config.settings import Settings, check_output_writable
from ..dataset.folder import LOCK, card_is_generated, ownership_problem, read_metadata
from ..dataset.identity import RowIdentity, resume_problem
from ..dataset.jsonl import CorruptLine, open_regular, scan
from ..dataset.lock import FolderLocked, RunLock
from ..dataset.writer import METADATA, DatasetWriter
from ..episode.outcome import judge_figures
from ..report.digests import RowDigests
from ..util.secrets import KnownSecrets
from .metadata import RunMetadata


class Row(NamedTuple):
    """One episode's line for results.jsonl (passed) or failures.jsonl."""

    line: str
    passed: bool
    #: (episode id, node id): what finalize() sorts and de-duplicates by
    key: tuple[str, str]
    #: the dict ``line`` is the JSON of, when the worker side of this process made it
    #: (``EpisodeOutcome.row``): the row's digest is taken from it, not re-parsed
    parsed: dict[str, Any] | None = None


def folder_in_use(folder: Path, holder: str) -> str:
    return (
        f"--openenv-output={str(folder)!r} is in use by another run ({holder}): two runs "
        "writing one folder would mix their rows. Wait for it to end or pass another "
        f"--openenv-output; if that run is gone, delete {folder / LOCK}"
    )


def read_resume_set(settings: Settings) -> tuple[dict[str, RowIdentity], bool]:
    """Node ids already in results.jsonl with what each row says of how it was played, and
    whether the file ends in a torn line (an older crash).

    Reads only: the torn line is cut off when the run claims the folder, so a
    ``--collect-only`` or a refused resume leaves the file as it was.
    """
    path = settings.output.folder / "results.jsonl"
    holder = RunLock(settings.output.folder / LOCK).live_holder()
    if holder is not None:  # its last line may be half-written now
        raise pytest.UsageError(folder_in_use(settings.output.folder, holder))
    played: dict[str, RowIdentity] = {}
    failures = settings.output.folder / "failures.jsonl"
    try:
        if failures.exists():  # appended to and read at the end: a file, or refused now
            open_regular(failures).close()
    except OSError as exc:
        raise pytest.UsageError(
            f"--openenv-resume cannot read {failures}: {exc.strerror or exc}. It must be the "
            "failures.jsonl file of an earlier run: move it away or pass another --openenv-output"
        ) from None

    def remember(record: dict[str, Any]) -> None:
        played[str(record.get("test", ""))] = RowIdentity.of(record)

    def remember_failed(record: dict[str, Any]) -> None:
        # a failed episode (its test failed, or its verdict did) finished: it counts by this
        # first attempt and is not played again (an errored one never finished, and is); a
        # pass of it wins
        failure = record.get("failure") if isinstance(record.get("failure"), dict) else {}
        test = str(record.get("test", ""))
        if failure.get("outcome") in ("failed", "verdict-failed") and test not in played:
            played[test] = RowIdentity.of(record)

    try:
        _, torn = scan(path, repair_torn_tail=False, visit=remember)
        if failures.exists() and not settings.output.resume_failed:
            scan(failures, repair_torn_tail=False, visit=remember_failed)
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
    return played, torn


def attempt_of(row: dict[str, Any]) -> int:
    """Which attempt at its episode a row is (``extra.attempt``; 1 when not said)."""
    extra = row.get("extra") if isinstance(row.get("extra"), dict) else {}
    attempt = extra.get("attempt", 1)
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 1


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
            # the paired tests of several models pair earlier episodes too
            "seed": row.get("seed"),
            "attempt": attempt_of(row),
            "repeat": (row.get("extra") or {}).get("repeat", 0),
            "verdict": (row.get("verify_metrics") or {}).get("verdict"),
            "judge": judge_figures(row.get("judge")),
        }
    return earlier


#: a failures.jsonl row's ``failure.outcome`` -> how the figures count it (a verdict-failed
#: row's test passed: it counts as passed, with its verdict failed)
EARLIER_OUTCOME = {"error": "errored", "failed": "failed", "verdict-failed": "passed"}


def earlier_failures(
    settings: Settings, passes: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """--openenv-resume: the rows of failures.jsonl that no later pass replaced, by test.

    Their items run again when collected; the rest (deselected, past a smaller n) stay in
    the folder's dataset, so the figures count them (``Accounts.count_rest_of_folder``).
    """
    from ..dataset.jsonl import iter_records

    failed: dict[str, dict[str, Any]] = {}
    try:
        for row in iter_records(settings.output.folder / "failures.jsonl"):
            test = str(row.get("test", ""))
            if test in passes:
                continue
            metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
            failure = row.get("failure") if isinstance(row.get("failure"), dict) else {}
            failed[test] = {
                "attempt": attempt_of(row),
                "outcome": EARLIER_OUTCOME.get(str(failure.get("outcome")), "failed"),
                "verdict": (row.get("verify_metrics") or {}).get("verdict"),
                "reward": row.get("reward"),
                "turns": metrics.get("turns"),
                "env": row.get("env"),
                "policy": row.get("policy"),
                "model": row.get("model"),
                # counted per model and paired too, as the earlier passes are
                "seed": row.get("seed"),
                "repeat": (row.get("extra") or {}).get("repeat", 0),
                "judge": judge_figures(row.get("judge")),
            }
    except (OSError, ValueError):  # figures only: a damaged failures file counts nothing
        return {}
    return failed


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
        #: --openenv-resume: node ids already in results.jsonl (their items are skipped), with
        #: what each row says of how it was played (a test that plays otherwise is refused)
        self.resumed: dict[str, RowIdentity] = {}
        #: results.jsonl ends in a torn line, cut off once the folder is claimed
        self.torn = False
        if settings.output.resume:
            self.resumed, self.torn = read_resume_set(settings)
        #: what the end of the run reads of each row, kept as it is written
        self.digests = RowDigests()
        self.writer = DatasetWriter(
            self.folder, resume=settings.output.resume, secrets=secrets, observer=self.digests.add
        )
        self.lock = RunLock(self.folder / LOCK)
        self.claimed = False
        #: this run claimed the folder once (it may have written its metadata there)
        self.was_claimed = False
        self.created_folder = False
        #: release() removed the folder made for this run, which held nothing but its metadata
        self.removed_folder = False
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
            for path in (
                self.settings.llm.cache,
                self.config.getoption("xmlpath", None),
                self.settings.output.inspect_log,
            )
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
        self.claimed = self.was_claimed = True
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
            if self.torn:
                self.repair_torn_line()
            self.writer.move_earlier_run_aside(card=card_is_generated(folder))
            self.writer.write_json(METADATA, run.to_json(finished=False))
        except OSError as exc:
            self.release(wrote=False)
            raise pytest.UsageError(
                f"--openenv-output={str(folder)!r} is not writable: {exc}"
            ) from None

    def refuse_resume(self, run: RunMetadata, rows_problem: str) -> NoReturn:
        """A test's collection found rows it would now play otherwise: refuse the run.

        Raised as the collection report arrives, before the folder is claimed (nothing is
        written) and before any episode; the run's own identity, when it differs too, is
        named instead (it names the option to set back).
        """
        mismatch = resume_problem(self.folder, read_metadata(self.folder), run.identity())
        raise pytest.UsageError(mismatch or rows_problem)

    def repair_torn_line(self) -> None:
        """Cut off the partial last line an earlier, killed run left (the folder is ours now)."""
        path = self.folder / "results.jsonl"
        scan(path, repair_torn_tail=True)
        self.torn = False
        self.warn(
            f"{path} ended in a torn line (an earlier run was killed mid-write); the partial "
            "line was removed and will be re-run"
        )

    def save(self, row: Row) -> str | None:
        """Append ``row``; the error, when this is the write that first failed."""
        if self.write_error is not None:
            self.unsaved += 1
            return None
        try:
            self.writer.append(row.line, passed=row.passed, key=row.key, parsed=row.parsed)
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
            # made for a run that wrote nothing but its metadata: leave no trace. Only this
            # run's own metadata goes; a folder holding anything else (a response cache
            # inside it) stays, rmdir() refusing a folder that is not empty
            for name in (METADATA,):
                with contextlib.suppress(OSError):
                    (self.folder / name).unlink()
            with contextlib.suppress(OSError):
                self.folder.rmdir()
                self.removed_folder = True
            self.created_folder = False

    def nothing_finished_lines(self) -> list[str]:
        """What an interrupted run that finished no episode did to the folder and cache."""
        folder = self.folder
        lines = ["interrupted before any episode finished: no row was written"]
        if self.removed_folder:
            lines.append(f"{folder} was made for this run and held nothing else: removed again")
        elif folder.is_dir():
            kept = ", ".join(sorted(path.name for path in folder.iterdir())) or "nothing"
            lines.append(f"{folder} kept as it is (it holds {kept})")
        for moved in self.writer.moved:
            stem, _, suffix = moved.name.partition(".")
            lines.append(f"earlier run's {stem}.{suffix.rpartition('.')[2]} kept as {moved}")
        cache, replay = self.settings.llm.cache, self.settings.llm.replay
        if cache and not replay:
            lines.append(
                f"the response cache {cache} (--openenv-cache) keeps every model answer "
                "already received: the same command replays them instead of paying again"
            )
        lines.append("run the same command to start again")
        return lines

    def warn(self, message: str) -> None:
        self.notes.append(f"WARNING: {message}")
        self.config.issue_config_time_warning(pytest.PytestWarning(message), stacklevel=2)
