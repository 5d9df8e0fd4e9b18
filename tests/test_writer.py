"""The controller's writer: rows appended as they come, files sorted and deduplicated at the end.

The writer remembers where it put each row of this run, so the end of the run
needs no re-reading; what it cannot vouch for (rows from an earlier run, a row
without its key) it reads back from disk. Either way the files end the same.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import read_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_openenv.dataset.writer import DatasetWriter


def row(index: int, attempt: int = 0) -> tuple[str, tuple[str, str]]:
    episode_id = f"ep-{index:06d}"
    test = f"t.py::test[{episode_id}]"
    line = json.dumps({"episode_id": episode_id, "test": test, "attempt": attempt})
    return line, (episode_id, test)


def ids(path: Path) -> list[str]:
    return [r["episode_id"] for r in read_jsonl(path)]


def test_rows_appended_in_order_are_left_in_place(tmp_path: Path) -> None:
    writer = DatasetWriter(tmp_path, resume=False)
    for i in range(5):
        line, key = row(i)
        writer.append(line, passed=True, key=key)
    inode = os.stat(writer.results_path).st_ino
    writer.finalize()
    assert ids(writer.results_path) == [f"ep-{i:06d}" for i in range(5)]
    assert os.stat(writer.results_path).st_ino == inode, "an already sorted file was rewritten"


@pytest.mark.parametrize("order", [[2, 0, 1], [0, 1, 2]])
def test_a_row_written_just_before_ctrl_c_is_kept_and_sorted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: list[int]
) -> None:
    """Ctrl-C between a line's write and the writer's note of it: finalize still sees it."""
    import pytest_openenv.dataset.writer as writer_module

    writer = DatasetWriter(tmp_path, resume=False)
    for i in order:
        line, key = row(i)
        writer.append(line, passed=True, key=key)
    real_write = os.write

    def write_then_interrupt(fd: int, data: bytes) -> int:
        real_write(fd, data)
        raise KeyboardInterrupt  # as a signal checked right after the system call would

    monkeypatch.setattr(writer_module.os, "write", write_then_interrupt)
    line, key = row(1, attempt=7)  # a later attempt of a row already there, out of order
    with pytest.raises(KeyboardInterrupt):
        writer.append(line, passed=True, key=key)
    monkeypatch.undo()
    writer.finalize()
    results = read_jsonl(writer.results_path)
    assert [r["episode_id"] for r in results] == [f"ep-{i:06d}" for i in range(3)]
    assert results[1]["attempt"] == 7  # the last line written wins, as for any other row


@settings(max_examples=60, deadline=None)
@given(
    order=st.lists(st.integers(0, 20), min_size=1, max_size=40),
    keyed=st.booleans(),
    earlier=st.lists(st.integers(0, 20), max_size=5),
    passes=st.lists(st.booleans(), min_size=40, max_size=40),
)
def test_final_files_are_sorted_deduplicated_and_failures_that_later_passed_dropped(
    tmp_path_factory: object,
    order: list[int],
    keyed: bool,
    earlier: list[int],
    passes: list[bool],
) -> None:
    folder = tmp_path_factory.mktemp("out")  # type: ignore[attr-defined]
    # rows of an earlier run (resume): the writer must read these back from disk
    if earlier:
        folder.joinpath("results.jsonl").write_text(
            "".join(row(i, attempt=-1)[0] + "\n" for i in earlier)
        )
    writer = DatasetWriter(folder, resume=True)
    expected_pass: dict[str, int] = {f"ep-{i:06d}": -1 for i in earlier}
    expected_fail: dict[str, int] = {}
    for attempt, (index, passed) in enumerate(zip(order, passes, strict=False)):
        line, key = row(index, attempt)
        writer.append(line, passed=passed, key=key if keyed else None)
        target = expected_pass if passed else expected_fail
        target[key[0]] = attempt  # the last row of an episode wins
    writer.finalize()
    results = read_jsonl(writer.results_path)
    failures = read_jsonl(writer.failures_path)
    assert [r["episode_id"] for r in results] == sorted(expected_pass)
    assert {r["episode_id"]: r["attempt"] for r in results} == expected_pass
    assert [r["episode_id"] for r in failures] == sorted(set(expected_fail) - set(expected_pass))
    assert all(r["attempt"] == expected_fail[r["episode_id"]] for r in failures)


def test_a_file_the_sorted_rewrite_replaces_is_synced_once_as_its_copy(
    tmp_path: Path, monkeypatch
) -> None:
    """The copy is synced before it takes the name; syncing the appended original too only
    waits on the disk for a file about to be replaced."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = DatasetWriter(tmp_path, resume=False)
    for i in (2, 0, 1):  # out of order: results.jsonl is rewritten
        line, key = row(i)
        writer.append(line, passed=True, key=key)
    line, key = row(5)
    writer.append(line, passed=False, key=key)  # in order: failures.jsonl stays as appended
    writer.finalize()
    assert ids(writer.results_path) == ["ep-000000", "ep-000001", "ep-000002"]
    assert synced.count("results.jsonl") == 0
    assert any(name.startswith(".results.jsonl") for name in synced)
    assert synced.count("failures.jsonl") == 1
