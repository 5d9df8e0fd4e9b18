"""Disk trouble: the output folder vanishes, turns into a file, or stops taking writes.

Tests run as root, where file modes deny nothing, so "read-only" is produced by
means that bind root too: deleting the folder, replacing it with a file, and a
file-size limit set on the running controller (``RLIMIT_FSIZE``: every write
past it fails with EFBIG, as a full disk fails with ENOSPC).
"""

from __future__ import annotations

import json
import re
import resource
import shutil
import signal

import pytest
from faults import ENV, Launcher, episode_ids, read_rows

N = 24
ALL_IDS = [f"ep-{i:06d}" for i in range(N)]
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py")
SLOW = {"FAULT_DELAY": "0.01"}


def all_rows(folder) -> list[dict]:
    return read_rows(folder / "results.jsonl") + read_rows(folder / "failures.jsonl")


def test_folder_deleted_mid_run_rows_are_restored(launcher: Launcher) -> None:
    launcher.write_episode_test()
    run = launcher.start(*RUN, env=SLOW)
    assert run.wait_rows(4)
    shutil.rmtree(launcher.output)
    finished = run.wait()
    finished.assert_clean()

    assert finished.returncode == 1, finished.stdout[-3000:]
    assert "was deleted or replaced during the run" in finished.stdout
    # every row ever written survives: the controller still held the files open
    assert sorted(episode_ids(all_rows(launcher.output))) == ALL_IDS
    assert (launcher.output / "summary.json").exists()


@pytest.mark.slow
def test_folder_replaced_by_file_mid_run_rows_go_to_sibling(launcher: Launcher) -> None:
    launcher.write_episode_test()
    run = launcher.start(*RUN, env=SLOW)
    assert run.wait_rows(4)
    shutil.rmtree(launcher.output)
    launcher.output.write_text("someone else's file\n")
    finished = run.wait()
    finished.assert_clean()

    assert finished.returncode == 1, finished.stdout[-3000:]
    recovered = launcher.output.with_name("out.recovered")
    assert f"restored to {recovered / 'results.jsonl'}" in finished.stdout
    assert launcher.output.read_text() == "someone else's file\n"  # not overwritten
    assert sorted(episode_ids(all_rows(recovered))) == ALL_IDS
    assert (recovered / "summary.json").exists()


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_writes_failing_mid_run_stop_cleanly_and_resume_finishes(
    launcher: Launcher, workers: str
) -> None:
    launcher.write_episode_test()
    run = launcher.start("-n", workers, *RUN, env={"FAULT_DELAY": "0.02"})
    assert run.wait_rows(3)
    # Freeze the controller so the limit lands exactly mid-way through the next line.
    run.signal_controller(signal.SIGSTOP)
    before = all_rows(launcher.output)
    size = max((launcher.output / name).stat().st_size for name in ("results.jsonl",))
    resource.prlimit(run.proc.pid, resource.RLIMIT_FSIZE, (size + 50, size + 50))
    run.signal_controller(signal.SIGCONT)
    finished = run.wait()
    finished.assert_clean()

    assert finished.returncode != 0
    assert "File too large" in finished.stdout, finished.stdout[-3000:]
    assert "could not be saved" in finished.stdout
    after = all_rows(launcher.output)  # every line whole, even the one cut by the limit
    assert {r["episode_id"] for r in before} <= {r["episode_id"] for r in after}
    # what is in the folder and what is not, counted (not "everything finished is in")
    told = re.search(
        r"interrupted after (\d+) of 24 episodes; (\d+) of them are in \S+, (\d+) could not "
        r"be written there\. Run the same command with --openenv-resume to finish \(it plays "
        r"the unwritten ones again\)",
        finished.stdout,
    )
    assert told, finished.stdout[-3000:]
    finished_count, written, unwritten = (int(group) for group in told.groups())
    assert written == len(after) and unwritten >= 1
    assert finished_count == written + unwritten
    assert len(after) < N  # the run stopped instead of burning episodes it cannot save

    resumed = launcher.run("-n", workers, *RUN, "--openenv-resume")
    assert resumed.returncode in (0, 1), resumed.stdout[-3000:]
    results = read_rows(launcher.output / "results.jsonl")
    failures = read_rows(launcher.output / "failures.jsonl")
    assert len(episode_ids(results)) == len(set(episode_ids(results)))
    assert sorted(episode_ids(results) + episode_ids(failures)) == ALL_IDS


@pytest.mark.slow
def test_torn_last_line_is_repaired_on_resume(launcher: Launcher) -> None:
    launcher.write_episode_test()
    keep_all = "--openenv-min-reward=-1"  # every episode passes: all of them land in results
    first = launcher.run(*RUN, keep_all)
    assert first.returncode == 0, first.stdout[-3000:]
    results = launcher.output / "results.jsonl"
    raw = results.read_bytes()
    last_start = raw.rstrip(b"\n").rfind(b"\n") + 1
    results.write_bytes(raw[: last_start + (len(raw) - last_start) // 2])  # half a line

    resumed = launcher.run(*RUN, keep_all, "--openenv-resume")
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert "ended in a torn line" in resumed.stdout
    # one episode re-ran; the gate and the summary count the whole dataset
    assert f"1 passed, {N - 1} skipped" in resumed.stdout  # pytest's own line
    assert (
        f"{N} passed, 0 failed, 0 errored, 0 skipped ({N - 1} of the passed from the earlier run"
        in resumed.stdout
    )
    rows = read_rows(results)
    assert episode_ids(rows) == ALL_IDS


@pytest.mark.slow
def test_corrupt_middle_line_is_a_usage_error_naming_file_and_line(launcher: Launcher) -> None:
    launcher.write_episode_test()
    first = launcher.run(*RUN, "--openenv-min-reward=-1")
    assert first.returncode == 0
    results = launcher.output / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"episode_id": "ep-000002", "messages": [tru\n'
    results.write_bytes(b"".join(lines))
    listing = sorted(p.name for p in launcher.output.iterdir())
    untouched = results.read_bytes()

    resumed = launcher.run(*RUN, "--openenv-resume")
    assert resumed.returncode == 4
    assert f"{results}:3" in resumed.text
    assert results.read_bytes() == untouched
    assert sorted(p.name for p in launcher.output.iterdir()) == listing
    assert "test_ep" not in resumed.stdout  # no episode ran


def test_output_that_is_a_file_is_a_usage_error_before_any_episode(launcher: Launcher) -> None:
    launcher.write_episode_test()
    launcher.output.write_text("not a folder\n")
    finished = launcher.run(*RUN)
    assert finished.returncode == 4
    assert "--openenv-output" in finished.text and "not a directory" in finished.text
    assert launcher.output.read_text() == "not a folder\n"


@pytest.mark.slow
def test_a_full_disk_at_the_final_sort_keeps_every_row_and_still_writes_summary_and_card(
    launcher: Launcher,
) -> None:
    """The sorted rewrite failing did not say the rows were intact and left
    no summary or card. The disk fills as in test_disk_full_xdist: a file-size limit on the
    controller (no file may grow past it), set during a pause at the session end."""
    import time

    launcher.write_episode_test()
    keep_all = "--openenv-min-reward=-1"
    assert launcher.run(*RUN, keep_all).returncode == 0
    results = launcher.output / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(reversed(lines)))  # unsorted: the end of the run rewrites it

    run = launcher.start(
        *RUN, keep_all, f"--openenv-n={N + 3}", "--openenv-resume", env={"FAULT_FINISH_DELAY": "3"}
    )
    marker = launcher.folder / "finishing"
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert run.proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    limit = results.stat().st_size - 1  # the sorted copy cannot be written whole
    resource.prlimit(run.proc.pid, resource.RLIMIT_FSIZE, (limit, limit))
    finished = run.wait()
    finished.assert_clean()
    assert finished.returncode == 1, finished.text[-3000:]
    assert (
        f"ERROR: the final sorted rewrite of {results} failed (File too large): every row is "
        "intact there, only not sorted by episode id"
    ) in finished.stdout, finished.stdout[-3000:]
    assert "--openenv-resume to sort it" in finished.stdout
    rows = read_rows(results)
    assert sorted(episode_ids(rows)) == ALL_IDS + [f"ep-{i:06d}" for i in range(N, N + 3)]
    assert episode_ids(rows) != sorted(episode_ids(rows))
    summary = json.loads((launcher.output / "summary.json").read_text())
    assert summary["figures"]["passed"] == N + 3
    assert f"| episodes | {N + 3} ({N + 3} passed" in (launcher.output / "README.md").read_text()
    assert not [p for p in launcher.output.iterdir() if ".tmp-" in p.name]

    resorted = launcher.run(*RUN, keep_all, f"--openenv-n={N + 3}", "--openenv-resume")
    assert resorted.returncode == 0, resorted.text[-3000:]
    assert episode_ids(read_rows(results)) == sorted(episode_ids(rows))
