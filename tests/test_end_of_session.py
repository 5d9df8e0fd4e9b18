"""The end of a run builds summary.json's row facts, report.html's table and the card's row
counts from what the writer kept of each row as it wrote it, not by reading every row back;
what it builds is what reading the finished files gives."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl

from pytest_openenv.dataset.writer import DatasetWriter
from pytest_openenv.report.digests import RowDigests
from pytest_openenv.report.page.rows import scan_folder
from pytest_openenv.report.row_facts import row_facts
from pytest_openenv.util.secrets import KnownSecrets

SECRET = "sk-live-0123456789abcdef0123"


def record(index: int, outcome: str, *, attempt: int = 0) -> dict[str, Any]:
    episode_id = f"ep-{index:06d}"
    row: dict[str, Any] = {
        "episode_id": episode_id,
        "test": f"t.py::test_{index % 2}[{episode_id}]",
        "env": "openspiel:tic_tac_toe",
        "policy": "openai",
        "model": ["m-a", "m-b"][index % 2],
        "seed": index,
        "reward": {"passed": 1.0, "failed": -1.0}.get(outcome, 0.0),
        "messages": [
            {"role": "system", "content": "play"},
            # a handful of distinct starting states, one of them carrying a secret
            {"role": "user", "content": f"board {index % 3} {SECRET if index % 3 == 0 else ''}"},
        ],
        "metrics": {"turns": 3 + index % 4, "prompt_tokens": 10 * index, "completion_tokens": 5},
        "task": {"prompt": f"play seed {index} " + "x" * (index * 7 % 300)},
        "extra": {"index": index, "repeat": 0, "attempt": attempt},
    }
    if outcome != "errored":
        row["extra"].update(
            judged_by="env-reward" if index % 5 else "outcome-field",
            verdict_rule=f"metadata.status='{outcome}' (guessed)",
            seeded=[True, False, None][index % 3],
            reason=f"{outcome}: reward {row['reward']}",
        )
    if outcome != "passed":
        kind = {"failed": "failed", "errored": "error", "verdict-failed": "verdict-failed"}[outcome]
        row["failure"] = {"outcome": kind, "message": f"why {index} {SECRET}"}
    return row


def write_run(writer: DatasetWriter, *, handed: bool = False) -> None:
    """Rows in a shuffled order, some twice (the last one wins), some failed then passed;
    ``handed``: each with the dict its line was dumped from, as a one-process run hands it."""
    order = list(range(40))
    random.Random(7).shuffle(order)
    outcomes = ["passed", "passed", "failed", "errored", "verdict-failed"]
    for index in order:
        outcome = outcomes[index % len(outcomes)]
        row = record(index, outcome)
        key = (f"ep-{index:06d}", f"t.py::test_{index % 2}[ep-{index:06d}]")
        parsed = row if handed else None
        writer.append(json.dumps(row), passed=outcome == "passed", key=key, parsed=parsed)
        if index % 7 == 0:  # played again: its second row replaces the first
            again = record(index, "passed", attempt=1)
            writer.append(json.dumps(again), passed=True, key=key, parsed=again if handed else None)
    writer.finalize()


def table(found: Any) -> list[Any]:
    return [(r.source, r.offset, r.length, r.group, *r.cells()) for r in found.rows]


@pytest.mark.parametrize("handed", [False, True], ids=["lines", "handed-dicts"])
@pytest.mark.parametrize(
    "secrets", [KnownSecrets(), KnownSecrets.collect(extra=[SECRET])], ids=["plain", "secret"]
)
def test_what_the_writer_kept_is_what_reading_the_finished_files_gives(
    tmp_path: Path, secrets: KnownSecrets, handed: bool
) -> None:
    """Digested from each line, or from the dict it was dumped from (a secret to scrub
    makes the writer digest the scrubbed line instead)."""
    digests = RowDigests()
    writer = DatasetWriter(tmp_path, resume=False, secrets=secrets, observer=digests.add)
    write_run(writer, handed=handed)
    assert writer.final is not None
    kept = digests.folder_rows(tmp_path, writer.final)
    read = scan_folder(tmp_path)
    assert kept is not None and table(kept) == table(read) and len(read.rows) == 40
    assert kept.groups == read.groups and kept.problems == read.problems == []
    assert row_facts(tmp_path, digests.facts(writer.final)) == row_facts(tmp_path)
    assert writer.row_counts() == {
        "results.jsonl": len(read_jsonl(tmp_path / "results.jsonl")),
        "failures.jsonl": len(read_jsonl(tmp_path / "failures.jsonl")),
    }
    if secrets.active:  # the digests hold the scrubbed text the files hold
        assert all(SECRET not in row.reason for row in kept.rows)


def test_rows_the_run_did_not_write_itself_are_read_from_the_files(tmp_path: Path) -> None:
    """A resumed folder holds an earlier run's rows: nothing is vouched for from memory."""
    (tmp_path / "results.jsonl").write_text(json.dumps(record(99, "passed")) + "\n")
    digests = RowDigests()
    writer = DatasetWriter(tmp_path, resume=True, observer=digests.add)
    write_run(writer)
    assert writer.final is None and writer.row_counts() is None
    assert digests.folder_rows(tmp_path, writer.final) is None
    assert digests.facts(writer.final) is None


#: a plugin of the test's own: notes, for each row digested, whether it came as a dict
HANDOFF_PROBE = """
import json
from pytest_openenv.report.digests import RowDigests

inner = RowDigests.add

def add(self, line, passed, key, parsed=None):
    if parsed is not None:  # the dict is what the row's line holds
        assert parsed == json.loads(line), key
    with open("digested.txt", "a") as out:
        out.write(("dict" if parsed is not None else "line") + "\\n")
    return inner(self, line, passed, key, parsed)

RowDigests.add = add
"""


@pytest.mark.parametrize("where", ["one process", "xdist", "secret in the environment"])
def test_only_a_one_process_run_with_nothing_to_scrub_digests_the_handed_rows(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    pytester.makepyfile(handoff_probe=HANDOFF_PROBE)
    pytester.syspathinsert()
    if where == "secret in the environment":
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    workers = ["-n", "2"] if where == "xdist" else ["-p", "no:xdist"]
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=6",
        "--openenv-policy=random",
        "-p",
        "handoff_probe",
        *workers,
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    digested = (pytester.path / "digested.txt").read_text().split()
    expected = "dict" if where == "one process" else "line"
    assert digested == [expected] * 6
    summary = json.loads((pytester.path / "openenv-results" / "summary.json").read_text())
    assert summary["seeding"]["episodes"] == 6


#: a plugin of the test's own: notes every read of the rows the end of the run makes
READ_PROBE = """
import pytest_openenv.dataset.card as card
import pytest_openenv.report.page as page
import pytest_openenv.report.row_facts as row_facts

def _noted(module, name):
    inner = getattr(module, name)

    def noted(path, *args, **kwargs):
        if path.exists():  # a read of a file (count_rows is asked of missing ones too)
            with open("reads.txt", "a") as out:
                out.write(f"{name}({path.name})\\n")
        return inner(path, *args, **kwargs)

    setattr(module, name, noted)

_noted(page, "scan_folder")
_noted(row_facts, "read_rows")
_noted(card, "count_rows")
"""


def test_the_end_of_a_run_reads_no_row_back(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(read_probe=READ_PROBE)
    pytester.syspathinsert()
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=6",
        "--openenv-policy=random",
        "-p",
        "read_probe",
        "-n",
        "2",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    folder = pytester.path / "openenv-results"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["seeding"]["episodes"] == 6
    assert (folder / "report.html").stat().st_size > 0
    reads = pytester.path / "reads.txt"
    assert not reads.exists(), reads.read_text()


#: workers that take long to exit; the controller notes which are still running as it begins
#: writing the files
SLOW_EXIT_PROBE = """
import atexit, os, time
import pytest

def pytest_configure(config):
    if hasattr(config, "workerinput"):
        with open(f"worker-{os.getpid()}.pid", "w") as out:
            out.write(str(os.getpid()))
        atexit.register(time.sleep, 4)  # an interpreter slow to tear down
        return
    from pytest_openenv.controller.finish import SessionEnd

    inner = SessionEnd.finish

    def finish(self, exitstatus):
        alive = []
        for path in sorted(os.listdir(".")):
            if path.startswith("worker-"):
                try:
                    os.kill(int(open(path).read()), 0)
                    alive.append(path)
                except ProcessLookupError:
                    pass
        with open("alive-at-files.txt", "w") as out:
            out.write(str(len(alive)))
        return inner(self, exitstatus)

    SessionEnd.finish = finish
"""


@pytest.mark.slow
def test_the_files_are_written_while_the_workers_exit(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(slow_exit_probe=SLOW_EXIT_PROBE)
    pytester.syspathinsert()
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=4", "-p", "slow_exit_probe", "-n", "2"
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert (pytester.path / "alive-at-files.txt").read_text() == "2"
    assert (pytester.path / "openenv-results" / "report.html").exists()
