"""Ctrl-C mid-run: the session ends promptly, says how far it got, keeps what finished.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group (controller
and xdist workers); ``kill -INT <pid>`` reaches the controller alone. Both are tried.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
from faults import ENV, Finished, Launcher, read_rows

N = 40
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py")
ALL_IDS = [f"ep-{i:06d}" for i in range(N)]


@pytest.mark.parametrize(
    ("workers", "target"), [("0", "group"), ("2", "group"), ("2", "controller")]
)
@pytest.mark.slow
def test_ctrl_c_ends_promptly_keeps_what_finished_and_resume_completes(
    launcher: Launcher, workers: str, target: str
) -> None:
    launcher.write_episode_test()
    run = launcher.start("-n", workers, *RUN, env={"FAULT_DELAY": "0.02"})
    assert run.wait_rows(5)
    sent = time.monotonic()
    if target == "group":
        run.signal_group(signal.SIGINT)
    else:
        run.signal_controller(signal.SIGINT)
    finished = run.wait(timeout=60)
    took = time.monotonic() - sent
    finished.assert_clean()

    assert finished.returncode == 2, finished.stdout[-3000:]  # pytest's "interrupted"
    assert took < 30, f"took {took:.1f}s to stop after SIGINT"
    match = re.search(r"interrupted after (\d+) of (\d+) episodes", finished.stdout)
    assert match, finished.stdout[-3000:]
    done, expected = int(match.group(1)), int(match.group(2))
    assert expected == N and 5 <= done < N
    assert "--openenv-resume" in finished.stdout

    output = launcher.output
    results = read_rows(output / "results.jsonl")
    failures = read_rows(output / "failures.jsonl")
    assert len(results) + len(failures) == done  # everything counted is on disk
    ids = [row["episode_id"] for row in results]
    assert ids == sorted(set(ids))  # finalized: sorted, once each
    summary = json.loads((output / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["episodes_expected"] == N
    assert summary["figures"]["passed"] == len(results)

    resumed = launcher.run("-n", workers, *RUN, "--openenv-resume")
    assert resumed.returncode == 1, resumed.stdout[-3000:]  # the losing seeds fail
    # what finished is skipped: the passes, and the failed episodes (each by its first attempt)
    kept = sum(1 for row in failures if row["failure"]["outcome"] == "failed")
    assert f"{len(results) + kept} skipped" in resumed.stdout
    assert "interrupted after" not in resumed.stdout
    final = read_rows(output / "results.jsonl")
    final_failures = read_rows(output / "failures.jsonl")
    final_ids = [row["episode_id"] for row in final]
    assert final_ids == sorted(set(final_ids))
    assert set(ids) <= set(final_ids)
    assert sorted(final_ids + [row["episode_id"] for row in final_failures]) == ALL_IDS


def written_as(path: Path) -> tuple[int, int] | None:
    """Which write of ``path`` is there (inode, mtime); None: none yet."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns


def interrupt_the_first_episode(launcher: Launcher, *args: str) -> Finished:
    """Ctrl-C while the first episode still plays (each move takes a minute)."""
    metadata = launcher.output / "metadata.json"
    earlier = written_as(metadata)  # an earlier run's, which this run moves aside
    run = launcher.start("-n", "0", *RUN, *args, env={"FAULT_DELAY": "60"})
    deadline = time.monotonic() + 60
    # the folder is claimed (its metadata written) as the collection ends, then it plays
    while written_as(metadata) in (None, earlier):
        assert run.proc.poll() is None, run.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(1.0)
    run.signal_group(signal.SIGINT)
    finished = run.wait(timeout=60)
    finished.assert_clean()
    return finished


@pytest.mark.slow
def test_ctrl_c_before_any_episode_finished_says_what_became_of_the_folder(
    launcher: Launcher,
) -> None:
    """It removed the folder it had made and printed no openenv section at all."""
    launcher.write_episode_test()
    finished = interrupt_the_first_episode(launcher, "--openenv-cache=answers")
    assert finished.returncode == 2, finished.text[-3000:]
    section = finished.stdout.partition(" openenv ")[2]
    assert "interrupted before any episode finished: no row was written" in section, (
        finished.stdout[-3000:]
    )
    # made for this run, it held nothing but the run's metadata: removed, and said so
    assert not launcher.output.exists()
    assert f"{launcher.output} was made for this run and held nothing else: removed" in section
    assert "the response cache answers (--openenv-cache) keeps every model answer" in section


@pytest.mark.slow
def test_ctrl_c_before_any_episode_keeps_an_earlier_runs_rows_and_names_them(
    launcher: Launcher,
) -> None:
    launcher.write_episode_test()
    first = launcher.run(*RUN, "--openenv-n=3")
    assert first.returncode in (0, 1), first.stdout[-3000:]
    earlier = read_rows(launcher.output / "results.jsonl") + read_rows(
        launcher.output / "failures.jsonl"
    )
    assert len(earlier) == 3
    finished = interrupt_the_first_episode(launcher)
    assert finished.returncode == 2, finished.text[-3000:]
    section = finished.stdout.partition(" openenv ")[2]
    assert "interrupted before any episode finished: no row was written" in section
    moved = re.findall(r"earlier run's (\S+) kept as (\S+)", section)
    assert ("failures.jsonl" in dict(moved)) or ("results.jsonl" in dict(moved)), section
    kept = [row for _, path in moved if path.endswith(".jsonl") for row in read_rows(Path(path))]
    assert sorted(row["episode_id"] for row in kept) == ["ep-000000", "ep-000001", "ep-000002"]
    assert f"{launcher.output} kept as it is" in section
