"""The episodes of an output folder, one small row each, and where each line sits.

Both the report written at session end and ``python -m pytest_openenv view`` read the
folder's ``results.jsonl`` and ``failures.jsonl`` once, line by line, keeping per episode
only what the table shows and the byte offset and length of its line: a transcript is
read again from the file when it is needed, never held.

A line that cannot be read is not fatal: a torn last line (a run killed mid-write) and a
corrupt line are each reported as a ``Problem`` (file, line number, what is wrong) and
left out, so a damaged folder still gets its report.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...dataset.writer import FAILURES, RESULTS

#: the table columns, in the order of each row's JSON array on the page
COLUMNS = (
    "id",
    "test",
    "env",
    "policy",
    "model",
    "group",
    "seed",
    "outcome",
    "reward",
    "turns",
    "tokens_in",
    "tokens_out",
    "reason",
    "prompt",
)
#: characters of the task prompt kept per row for the page's text search
PROMPT_CHARS = 240
REASON_CHARS = 300
SOURCES = (RESULTS, FAILURES)


@dataclass(frozen=True)
class Problem:
    """A line the folder could not give: where it is and why."""

    file: str
    line: int
    what: str
    torn: bool = False

    def text(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


@dataclass(slots=True)
class EpisodeRow:
    """What the table shows of one episode, and where its whole line is."""

    source: int  # index into SOURCES
    offset: int
    length: int
    episode_id: str
    test: str
    env: str
    policy: str
    model: str
    seed: int | None
    outcome: str  # passed, failed, errored
    reward: float
    turns: int
    tokens_in: int
    tokens_out: int
    reason: str
    prompt: str
    index: int
    repeat: int

    #: the episode's group (test function, env, policy / model): index into ``FolderRows.groups``
    group: int = 0

    def cells(self) -> list[Any]:
        return [
            self.episode_id,
            self.test,
            self.env,
            self.policy,
            self.model,
            self.group,
            self.seed,
            self.outcome,
            self.reward,
            self.turns,
            self.tokens_in,
            self.tokens_out,
            self.reason,
            self.prompt,
        ]

    @property
    def function(self) -> str:
        """The test function of the episode's node id (``path::test`` without ``[...]``)."""
        return self.test.rpartition("[")[0] or self.test

    @property
    def group_key(self) -> tuple[str, str, str]:
        """(test function, env, model or policy): the group its figures are kept in."""
        return (self.function, self.env, self.model or self.policy)


@dataclass
class FolderRows:
    folder: Path
    rows: list[EpisodeRow] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    #: every group of the folder, sorted: (test function, env, model or policy)
    groups: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def functions(self) -> list[str]:
        return sorted({row.function for row in self.rows})

    def number_groups(self) -> None:
        """Give each row the index of its group in ``groups``."""
        self.groups = sorted({row.group_key for row in self.rows})
        index = {key: i for i, key in enumerate(self.groups)}
        for row in self.rows:
            row.group = index[row.group_key]

    def counts(self) -> dict[str, int]:
        counts = {"passed": 0, "failed": 0, "errored": 0}
        for row in self.rows:
            counts[row.outcome] = counts.get(row.outcome, 0) + 1
        return counts

    def path(self, row: EpisodeRow) -> Path:
        return self.folder / SOURCES[row.source]

    def read_line(self, row: EpisodeRow) -> bytes:
        """The row's whole line as written (one ``pread``: the file is never read whole)."""
        with self.path(row).open("rb") as handle:
            handle.seek(row.offset)
            return handle.read(row.length).rstrip(b"\n")

    def lines(self, chosen: list[int]) -> Iterator[tuple[int, bytes]]:
        """(row number, line) for the rows ``chosen``, reading each file front to back."""
        by_source: dict[int, list[int]] = {}
        for number in chosen:
            by_source.setdefault(self.rows[number].source, []).append(number)
        for source, numbers in sorted(by_source.items()):
            numbers.sort(key=lambda n: self.rows[n].offset)
            with (self.folder / SOURCES[source]).open("rb") as handle:
                for number in numbers:
                    row = self.rows[number]
                    handle.seek(row.offset)
                    yield number, handle.read(row.length).rstrip(b"\n")


def anchor(episode_id: str, function: str, several_tests: bool) -> str:
    """The page fragment of an episode: its id, and its test function when ids repeat."""
    return f"{episode_id}@{function}" if several_tests else episode_id


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _float(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number and abs(number) != float("inf") else 0.0


def _short(text: Any, limit: int) -> str:
    value = text if isinstance(text, str) else "" if text is None else str(text)
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def row_from_record(record: dict[str, Any], source: int, offset: int, length: int) -> EpisodeRow:
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    extra = record.get("extra") if isinstance(record.get("extra"), dict) else {}
    task = record.get("task") if isinstance(record.get("task"), dict) else {}
    failure = record.get("failure") if isinstance(record.get("failure"), dict) else {}
    verdict_failed = source != 0 and failure.get("outcome") == "verdict-failed"
    if source == 0 or verdict_failed:
        outcome = "passed"  # its test passed, as the summary counts it
    else:
        outcome = "errored" if failure.get("outcome") == "error" else "failed"
    # a failed episode's own reason is short ("loss: reward -1 ..."); an error has only its
    # message; a passed one has no failure reason to show, unless the env's verdict kept it
    # out of the training split
    if verdict_failed:
        why = extra.get("reason") or failure.get("message") or "the env's verdict failed"
        reason = f"not in results.jsonl: {why}"
    elif outcome == "passed":
        reason = ""
    else:
        reason = (
            (failure.get("message") if outcome == "errored" else extra.get("reason"))
            or failure.get("message")
            or ""
        )
    seed = record.get("seed")
    return EpisodeRow(
        source=source,
        offset=offset,
        length=length,
        episode_id=str(record.get("episode_id", "")),
        test=sys.intern(str(record.get("test") or "")),
        env=sys.intern(str(record.get("env") or "")),
        policy=sys.intern(str(record.get("policy") or "")),
        model=sys.intern(str(record.get("model") or "")),
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        outcome=sys.intern(outcome),
        reward=_float(record.get("reward")),
        turns=_int(metrics.get("turns")),
        tokens_in=_int(metrics.get("prompt_tokens")),
        tokens_out=_int(metrics.get("completion_tokens")),
        reason=_short(reason, REASON_CHARS),
        prompt=_short(task.get("prompt"), PROMPT_CHARS),
        index=_int(extra.get("index")),
        repeat=_int(extra.get("repeat")),
    )


def scan_file(path: Path, source: int, into: FolderRows) -> None:
    if not path.is_file():
        return
    with path.open("rb") as handle:
        offset = 0
        for number, raw in enumerate(handle, 1):
            length = len(raw)
            whole = raw.endswith(b"\n")
            if raw.strip():
                try:
                    record = json.loads(raw)
                    if not isinstance(record, dict) or "episode_id" not in record:
                        raise ValueError("not an episode record (no episode_id)")
                except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                    torn = not whole
                    what = (
                        f"torn last line ({length} bytes without a newline: the run writing "
                        "it was killed mid-write); left out"
                        if torn
                        else f"not an episode record ({str(exc)[:200]}); left out"
                    )
                    into.problems.append(Problem(path.name, number, what, torn))
                else:
                    into.rows.append(row_from_record(record, source, offset, length))
            offset += length


def scan_folder(folder: Path) -> FolderRows:
    """Every readable episode of the folder, sorted by episode id then test."""
    found = FolderRows(folder)
    for source, name in enumerate(SOURCES):
        scan_file(folder / name, source, found)
    found.rows.sort(key=lambda row: (row.episode_id, row.test))
    found.number_groups()
    return found


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of the folder, or {} when missing or unreadable."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
