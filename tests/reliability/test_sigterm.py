"""SIGTERM mid-run (a cancelled CI job, Kubernetes, ``docker stop``) is an interrupt.

It was a hard kill: no summary, no card, a stale lock, worker tracebacks.
Now the run stops as on Ctrl-C: the files are finished and the lock released, the
resume command is printed, and pytest exits 2. ``docker stop`` and Kubernetes signal
the container's first process (the controller); a GitLab runner the whole group.
"""

from __future__ import annotations

import json
import re
import signal

import pytest
from faults import ENV, Launcher, read_rows

N = 40
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py")


@pytest.mark.parametrize(
    ("workers", "target"), [("0", "controller"), ("2", "controller"), ("2", "group")]
)
@pytest.mark.slow
def test_sigterm_finishes_the_files_and_exits_as_an_interrupt(
    launcher: Launcher, workers: str, target: str
) -> None:
    launcher.write_episode_test()
    run = launcher.start("-n", workers, *RUN, env={"FAULT_DELAY": "0.02"})
    assert run.wait_rows(5)
    if target == "group":
        run.signal_group(signal.SIGTERM)
    else:
        run.signal_controller(signal.SIGTERM)
    finished = run.wait(timeout=60)
    finished.assert_clean()
    assert "Traceback" not in finished.text, finished.text[-4000:]

    assert finished.returncode == 2, (finished.returncode, finished.stdout[-3000:])
    match = re.search(r"interrupted after (\d+) of (\d+) episodes", finished.stdout)
    assert match, finished.stdout[-3000:]
    assert "--openenv-resume" in finished.stdout
    output = launcher.output
    summary = json.loads((output / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["exit_status"] == 2
    assert (output / "README.md").exists()
    assert not (output / ".openenv.lock").exists(), sorted(p.name for p in output.iterdir())
    done = int(match.group(1))
    rows = read_rows(output / "results.jsonl") + read_rows(output / "failures.jsonl")
    assert len(rows) == done

    # the folder is free: resume completes the run
    resumed = launcher.run("-n", workers, *RUN, "--openenv-resume")
    assert resumed.returncode in (0, 1), resumed.stdout[-3000:]
    assert "interrupted after" not in resumed.stdout
