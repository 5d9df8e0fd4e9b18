"""``OutputFolder``: checked at start, claimed before the first episode, rows, release."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from pytest_openenv.config.settings import Settings
from pytest_openenv.controller.metadata import RunMetadata
from pytest_openenv.controller.output import OutputFolder, Row
from pytest_openenv.episode.service import EpisodeService
from pytest_openenv.report.gates import GateConfig
from pytest_openenv.util.secrets import KnownSecrets

ROW = json.dumps({"episode_id": "ep-000000", "test": "t.py::test[ep-000000]"})


def folder_for(pytester: pytest.Pytester, *args: str) -> tuple[OutputFolder, RunMetadata]:
    config = pytester.parseconfig(*args)
    settings = Settings.from_config(config)
    output = OutputFolder(config, settings, KnownSecrets(), notes=[])
    gate = GateConfig.from_settings(settings, invocation_dir=pytester.path)
    return output, RunMetadata(settings, EpisodeService(settings), gate)


def test_a_claimed_folder_is_made_locked_and_described(pytester: pytest.Pytester) -> None:
    target = pytester.path / "out" / "run"
    output, run = folder_for(pytester, f"--openenv-output={target}")
    assert not target.exists()  # checking at start writes nothing
    output.claim(run)
    metadata = json.loads((target / "metadata.json").read_text())
    assert metadata["written_by"] == "pytest-openenv" and metadata["finished_at"] is None
    assert output.lock.held
    other, other_run = folder_for(pytester, f"--openenv-output={target}")
    with pytest.raises(pytest.UsageError, match="is in use by another run"):
        other.claim(other_run)
    output.release(wrote=False)  # made for a run that wrote nothing: no trace left
    assert not target.exists()


def test_a_folder_kept_after_rows_were_written(pytester: pytest.Pytester) -> None:
    target = pytester.path / "out"
    output, run = folder_for(pytester, f"--openenv-output={target}")
    output.claim(run)
    assert output.save(Row(ROW, True, ("ep-000000", "t.py::test[ep-000000]"))) is None
    output.release(wrote=True)
    assert (target / "results.jsonl").read_text() == ROW + "\n"
    assert not output.lock.held


def test_a_foreign_folder_is_refused_before_anything_is_written(pytester: pytest.Pytester) -> None:
    target = pytester.mkdir("photos")
    (target / "holiday.jpg").write_bytes(b"\xff\xd8")
    output, run = folder_for(pytester, f"--openenv-output={target}")
    with pytest.raises(
        pytest.UsageError, match=r"holds files pytest-openenv did not write: holiday"
    ):
        output.claim(run)
    assert sorted(p.name for p in target.iterdir()) == ["holiday.jpg"]


def test_the_first_write_error_is_reported_once_and_later_rows_counted(
    pytester: pytest.Pytester,
) -> None:
    target = pytester.path / "out"
    output, run = folder_for(pytester, f"--openenv-output={target}")
    output.claim(run)
    shutil.rmtree(target)
    target.write_text("")  # the folder was replaced by a file: no row can be written
    row = Row(ROW, True, ("ep-000000", "t.py::test[ep-000000]"))
    error = output.save(row)
    assert error is not None and error.startswith(f"cannot write to {target / 'results.jsonl'}")
    assert output.save(row) is None  # the run was stopped at the first
    assert output.unsaved == 2 and output.write_error == error
    output.release(wrote=True)


def test_the_resume_set_is_read_and_a_torn_line_repaired_at_the_claim(
    pytester: pytest.Pytester,
) -> None:
    target = pytester.mkdir("out")
    whole = json.dumps({"episode_id": "ep-000000", "test": "t.py::test[ep-000000]"})
    torn = whole + '\n{"episode_id": "ep-0000'
    (target / "results.jsonl").write_text(torn)
    output, run = folder_for(pytester, f"--openenv-output={target}", "--openenv-resume")
    warned: list[str] = []

    class Recorder:
        def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
            warned.append(str(warning_message.message))

    output.config.pluginmanager.register(Recorder())  # config-time warnings are replayed
    assert set(output.resumed) == {"t.py::test[ep-000000]"}
    # reading the resume set changes nothing (--collect-only reads it too)
    assert (target / "results.jsonl").read_text() == torn
    output.claim(run)
    assert any("ended in a torn line" in message for message in warned), warned
    assert (target / "results.jsonl").read_text() == whole + "\n"
    output.release(wrote=True)


def test_an_unusable_path_is_a_usage_error_at_start(pytester: pytest.Pytester) -> None:
    blocker = pytester.path / "a-file"
    blocker.write_text("")
    with pytest.raises(pytest.UsageError, match="exists and is not a directory"):
        folder_for(pytester, f"--openenv-output={Path(blocker) / 'out'}")
