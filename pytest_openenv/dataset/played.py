"""The episodes an output folder holds, read back from its rows, and how they group.

``results.jsonl`` and ``failures.jsonl`` together hold every episode a run played (a
resumed run's earlier episodes included), one row each once the writer has finalized
them. What is made from a finished folder (inspect logs, preference pairs) reads them
here, so a folder written by an earlier run gives the same files as the run itself.

A *group* is what the summary keeps figures for: the test function, the env, and the
model that played (the policy where no model did). Rows are indexed first and read
back one group at a time, so memory holds one group's transcripts, not the run's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

from .jsonl import parse_line, scan
from .writer import FAILURES, RESULTS

K = TypeVar("K")


@dataclass(frozen=True, order=True)
class Group:
    """One group of episodes: test function, env, and the model (or policy) that played."""

    test: str
    env: str
    player: str
    #: ``model`` when the player is a model id, ``policy`` when no model played
    player_kind: str = "model"

    @property
    def label(self) -> str:
        return f"{self.test} · {self.env} · {self.player}"


def function_of(nodeid: str) -> str:
    """``tests/t.py::test_x[ep-000001]`` -> ``tests/t.py::test_x``."""
    return nodeid.rpartition("[")[0] if nodeid.endswith("]") else nodeid


def group_of(row: dict[str, Any]) -> Group:
    model = row.get("model")
    if model:
        return Group(function_of(str(row.get("test", ""))), str(row.get("env", "")), model)
    policy = str(row.get("policy") or "")
    return Group(function_of(str(row.get("test", ""))), str(row.get("env", "")), policy, "policy")


def is_error(row: dict[str, Any]) -> bool:
    """An episode that errored (infrastructure, not the agent): no verdict to learn from."""
    failure = row.get("failure") or {}
    return (
        failure.get("outcome") == "error"
        or (row.get("verify_metrics") or {}).get("outcome") == "error"
    )


@dataclass(frozen=True)
class _Line:
    path: Path
    offset: int
    length: int
    episode_id: str


class PlayedEpisodes(Generic[K]):
    """The rows of an output folder, indexed by ``key`` (offsets only, until read).

    ``key``: where a row belongs (``group_of``: its group); rows it gives None are left out.
    Lines are read as a resume reads them (``jsonl.scan``, nothing repaired): a last line
    a killed writer left half-written is left out and its file listed in ``torn``; any
    other line that is not an episode record raises ``CorruptLine`` naming file:line.
    """

    def __init__(self, folder: Path, key: Callable[[dict[str, Any]], K | None]) -> None:
        self.folder = folder
        self.key = key
        self.groups: dict[K, list[_Line]] = {}
        #: the files whose torn last line was left out
        self.torn: list[Path] = []
        for name in (RESULTS, FAILURES):
            self._index(folder / name)

    def _index(self, path: Path) -> None:
        if not path.is_file():
            return
        # only each row's key and id are kept while indexing, never its transcript
        seen: list[tuple[K | None, str]] = []
        rows, torn = scan(
            path,
            repair_torn_tail=False,
            visit=lambda row: seen.append((self.key(row), str(row["episode_id"]))),
        )
        for row, (key, episode_id) in zip(rows, seen, strict=True):
            if key is not None:
                self.groups.setdefault(key, []).append(
                    _Line(path, row.offset, row.length, episode_id)
                )
        if torn:
            self.torn.append(path)

    def __len__(self) -> int:
        return sum(len(lines) for lines in self.groups.values())

    def rows(self, group: K) -> list[dict[str, Any]]:
        """The group's rows, sorted by episode id (the passing row of an id wins)."""
        chosen: dict[str, _Line] = {}
        for line in self.groups.get(group, []):
            # results.jsonl is indexed first: a failure of an id that later passed is stale
            chosen.setdefault(line.episode_id, line)
        rows = []
        handles: dict[Path, BinaryIO] = {}
        try:
            for episode_id in sorted(chosen):
                line = chosen[episode_id]
                handle = handles.get(line.path)
                if handle is None:
                    handle = handles[line.path] = line.path.open("rb")
                handle.seek(line.offset)
                rows.append(parse_line(line.path, 0, handle.read(line.length)))
        finally:
            for handle in handles.values():
                handle.close()
        return rows

    def each_group(self) -> Iterator[tuple[K, list[dict[str, Any]]]]:
        for group in sorted(self.groups):  # type: ignore[type-var]
            yield group, self.rows(group)
