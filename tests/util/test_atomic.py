"""``util/atomic.py``: the one way a file is replaced (output folder files, cache entries).

A reader sees the old content or the whole new one; a failure on the way leaves the
old file and no temp file; threads writing one name never share a temp file.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from pytest_openenv.util.atomic import replacing, temp_path, temp_target, write_atomically


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_new_content_replaces_the_old_and_no_temp_file_stays(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_bytes(b"old")
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert names(tmp_path) == ["summary.json"]


def test_a_failure_midway_keeps_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "results.jsonl"
    target.write_bytes(b"line 1\nline 2\n")
    with pytest.raises(OSError, match="disk full"), replacing(target) as handle:
        handle.write(b"line 2\n")
        assert [temp_target(n) for n in names(tmp_path)] == ["results.jsonl", None]
        raise OSError(28, "disk full")
    assert target.read_bytes() == b"line 1\nline 2\n"
    assert names(tmp_path) == ["results.jsonl"]


def test_keep_existing_lets_the_first_writer_win(tmp_path: Path) -> None:
    target = tmp_path / "entry.json"
    write_atomically(target, b"first", keep_existing=True)
    write_atomically(target, b"second", keep_existing=True)
    assert target.read_bytes() == b"first"
    write_atomically(target, b"third")  # a plain replace overwrites
    assert target.read_bytes() == b"third"
    assert names(tmp_path) == ["entry.json"]


def test_durable_writes_reach_the_disk_before_taking_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_atomically(tmp_path / "a", b"x")
    assert len(synced) == 1
    write_atomically(tmp_path / "b", b"x", durable=False)
    assert len(synced) == 1


def test_threads_writing_one_name_leave_one_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "shared.json"
    contents = [bytes([65 + i]) * 200_000 for i in range(8)]
    errors: list[BaseException] = []

    def write(data: bytes) -> None:
        try:
            write_atomically(target, data, durable=False)
        except BaseException as exc:  # a shared temp file would fail or tear here
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(data,)) for data in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert target.read_bytes() in contents
    assert names(tmp_path) == ["shared.json"]


@pytest.mark.parametrize(
    ("name", "target"),
    [
        (".results.jsonl.tmp-4242", "results.jsonl"),  # what earlier versions named them
        (".README.md.tmp-17-0a1b2c3d", "README.md"),
        ("results.jsonl", None),
        (".results.jsonl.tmp-", None),
        (".notes.tmp-x1", None),
        (".env", None),
    ],
)
def test_temp_names_say_which_file_they_replace(name: str, target: str | None) -> None:
    assert temp_target(name) == target


def test_every_temp_name_is_fresh_and_recognised(tmp_path: Path) -> None:
    path = tmp_path / "metadata.json"
    made = {temp_path(path).name for _ in range(50)}
    assert len(made) == 50
    assert {temp_target(name) for name in made} == {"metadata.json"}
