"""Ctrl-C mid-run: the session ends promptly, says how far it got, keeps what finished.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group (controller
and xdist workers); ``kill -INT <pid>`` reaches the controller alone. Both are tried.
"""

from __future__ import annotations

import json
import re
import signal
import time

import pytest
from faults import ENV, Launcher, read_rows

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
