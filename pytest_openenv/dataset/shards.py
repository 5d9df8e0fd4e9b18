"""The output folders of a sharded run (``--openenv-shard``), checked and read as one.

Each shard's ``metadata.json`` records the run identity (``identity.py``: the shard is a
field of it) and ``shard``: its index, the count, and the whole run's episode tests with
their n and repeats. Folders merge when they are shards of one run: the same identity but
the shard, the same count and tests, no shard twice, and (unless a partial merge is asked
for) none missing. What a missing shard held is known from the tests: episode index i of
every test belongs to shard ``i % count``.

The rows are read back in episode-id order by a k-way merge of the shards' files, which
each run left sorted by (episode id, test) at its end: one line per shard in memory.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ShardsRefused
from .folder import read_metadata
from .identity import IDENTITY_OPTIONS, identity_mismatch, recorded_identity
from .jsonl import open_regular, parse_line
from .writer import FAILURES, RESULTS, SUMMARY

#: ids a message names of a missing shard before it says how many more there are
IDS_SHOWN = 12


@dataclass(frozen=True)
class ShardFolder:
    """One shard's output folder as its run left it."""

    path: Path
    metadata: dict[str, Any]
    index: int
    count: int
    source: str
    #: test function -> {"n", "repeats"}: the whole run's episode tests
    tests: dict[str, dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> dict[str, Any]:
        return recorded_identity(self.metadata)


def read_shard(path: Path) -> ShardFolder:
    """``path`` as a shard folder, or ``ShardsRefused`` saying what it lacks."""
    metadata = read_metadata(path)
    if metadata is None:
        raise ShardsRefused(
            f"{path} is not an output folder of pytest-openenv (no readable metadata.json)"
        )
    shard = metadata.get("shard")
    if not isinstance(shard, dict) or not isinstance(shard.get("count"), int):
        raise ShardsRefused(
            f"{path} holds a run that was not sharded (its metadata.json has no shard): "
            "merge takes the folders of one run played with --openenv-shard=I/N"
        )
    if metadata.get("finished_at") is None:
        raise ShardsRefused(
            f"{path}: its run did not finish (metadata.json has no finished_at): run the same "
            "command again with --openenv-resume to finish that shard, then merge"
        )
    summary: dict[str, Any] = {}
    try:
        loaded = json.loads((path / SUMMARY).read_text(encoding="utf-8"))
        summary = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        pass
    tests = shard.get("tests") if isinstance(shard.get("tests"), dict) else {}
    return ShardFolder(
        path,
        metadata,
        int(shard["index"]),
        int(shard["count"]),
        str(shard.get("source", "option")),
        {str(test): dict(known) for test, known in tests.items()},
        summary,
    )


@dataclass(frozen=True)
class ShardSet:
    """Shards of one run: present ones by index, and what the missing ones hold."""

    shards: list[ShardFolder]
    count: int
    tests: dict[str, dict[str, Any]]
    missing: list[int]
    #: the run's identity with no shard: what the run on one machine records
    identity: dict[str, Any]

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    def missing_ids(self, index: int) -> dict[str, list[str]]:
        """The episode ids shard ``index`` holds, by test."""
        prefix = str(self.identity.get("id_prefix") or "")
        return {
            test: episode_ids(index, self.count, known, prefix)
            for test, known in sorted(self.tests.items())
        }

    def missing_text(self) -> str:
        """Each missing shard and the episodes it holds (the first few ids of each test)."""
        parts = []
        for index in self.missing:
            held = []
            for test, ids in self.missing_ids(index).items():
                shown = ", ".join(ids[:IDS_SHOWN])
                more = f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else ""
                held.append(f"{test}: {shown}{more}" if ids else f"{test}: none")
            parts.append(
                f"shard {index}/{self.count} (--openenv-shard={index}/{self.count}) holds "
                + "; ".join(held)
            )
        return ". ".join(parts)


def episode_ids(index: int, count: int, known: dict[str, int], prefix: str = "") -> list[str]:
    """The ids of one test's episodes in shard ``index`` of ``count`` (a model's id part
    left out: each model plays the same ids)."""
    n, repeats = int(known.get("n", 0)), int(known.get("repeats", 1))
    head = f"{prefix}-" if prefix else ""
    ids = []
    for i in range(index, n, count):
        base = f"{head}ep-{i:06d}"
        ids.extend([f"{base}-r{r}" for r in range(repeats)] if repeats > 1 else [base])
    return ids


def check_shards(folders: list[ShardFolder], *, allow_partial: bool) -> ShardSet:
    """The folders as the shards of one run, or ``ShardsRefused`` naming what differs."""
    if not folders:
        raise ShardsRefused("no shard folder given: name the output folders of the shards")
    first = folders[0]
    for other in folders[1:]:
        if other.count != first.count:
            raise ShardsRefused(
                f"{other.path} is shard {other.index}/{other.count} and {first.path} is shard "
                f"{first.index}/{first.count}: field shard count differs ({other.count} vs "
                f"{first.count}); these are not the shards of one run"
            )
        mismatch = identity_mismatch(
            {**first.identity, "shard": None}, {**other.identity, "shard": None}
        )
        if mismatch is not None:
            name, before, now = mismatch
            option = IDENTITY_OPTIONS.get(name) or "the row layout"
            raise ShardsRefused(
                f"{other.path} is not a shard of the run of {first.path}: field {name} differs "
                f"({json.dumps(now)} vs {json.dumps(before)}, {option}); merge only the "
                "folders of one run"
            )
        if other.tests != first.tests:
            names = sorted(
                test
                for test in {*other.tests, *first.tests}
                if other.tests.get(test) != first.tests.get(test)
            )
            raise ShardsRefused(
                f"{other.path} is not a shard of the run of {first.path}: field tests differs "
                f"(the episode tests or their n: {', '.join(names)}); merge only the folders "
                "of one run"
            )
    seen: dict[int, ShardFolder] = {}
    for folder in folders:
        twin = seen.get(folder.index)
        if twin is not None:
            raise ShardsRefused(
                f"{folder.path} and {twin.path} are both shard {folder.index}/{folder.count}: "
                "shards overlap; give each shard's folder once"
            )
        seen[folder.index] = folder
    shard_set = ShardSet(
        sorted(folders, key=lambda folder: folder.index),
        first.count,
        first.tests,
        [],
        {**first.identity, "shard": None},
    )
    # a shard past every test's n holds no episode: its run collected nothing, wrote nothing
    shard_set.missing.extend(
        index
        for index in range(first.count)
        if index not in seen and any(shard_set.missing_ids(index).values())
    )
    if shard_set.missing and not allow_partial:
        raise ShardsRefused(
            f"{len(shard_set.missing)} of {first.count} shards missing, nothing written: "
            f"{shard_set.missing_text()}. Play them, or pass --allow-partial for figures "
            "that say they are partial"
        )
    return shard_set


#: one row of a shard's file in the merge, sorted by (episode id, test): its key, whether it
#: is a results.jsonl row, its line, the file, and the row parsed (once: parsing is the cost)
MergedLine = tuple[tuple[str, str], bool, bytes, Path, dict[str, Any]]


def _lines(path: Path, train: bool) -> Iterator[MergedLine]:
    """``path``'s rows in its order, each with its sort key (nothing kept but the line)."""
    if not path.is_file():
        return
    with open_regular(path) as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            if not raw.endswith(b"\n"):
                raise ShardsRefused(
                    f"{path}:{number} is cut off mid-write (its run was killed): run that shard "
                    "again with --openenv-resume to finish it, then merge"
                )
            record = parse_line(path, number, raw)
            key = (str(record["episode_id"]), str(record.get("test", "")))
            yield key, train, raw, path, record


def merged_lines(shards: list[ShardFolder]) -> Iterator[MergedLine]:
    """Every row of every shard, results and failures together, in (episode id, test) order;
    a row in two shards (or out of order in its file) is refused."""
    streams = [
        _lines(shard.path / name, name == RESULTS)
        for shard in shards
        for name in (RESULTS, FAILURES)
    ]
    last: MergedLine | None = None
    for line in heapq.merge(*streams, key=lambda line: line[0]):
        if last is not None and line[0] <= last[0]:
            if line[0] == last[0]:
                raise ShardsRefused(
                    f"episode {line[0][1] or line[0][0]} is in both {last[3]} and {line[3]}: "
                    "shards overlap; nothing written"
                )
            raise ShardsRefused(
                f"{line[3]} is not sorted by episode id (its run's final rewrite did not "
                "happen): run that shard again with --openenv-resume to sort it, then merge"
            )
        last = line
        yield line
