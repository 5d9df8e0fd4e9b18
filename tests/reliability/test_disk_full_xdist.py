"""A full disk under xdist: no episode is handed out, or left queued, after the first write error.

xdist sends each worker a batch of items ahead (a quarter of the run at the
start), and a worker told to shut down still plays its whole batch. So a write
error early in a big run used to be followed by hundreds of episodes played and
thrown away. The controller now takes the queued items back at the first error:
each worker finishes the episode it is on and at most the one it picked up next.

The disk fills as in ``test_disk_trouble``: a file-size limit on the controller
(``RLIMIT_FSIZE``; writes past it fail as on a full disk), set while it is stopped.
Workers log each episode they start to a file of their own, outside the limit.
"""

from __future__ import annotations

import resource
import signal

import pytest
from faults import ENV, EPISODE_TEST, Launcher, episode_ids, read_rows

N = 200
WORKERS = 2
#: each worker: the episode it is on, the one it picked up next, and one whose report
#: was already on its way while the controller was stopped
MOST_AFTER_ERROR = 3 * WORKERS
#: seconds each move waits: long beside the controller's reaction once it resumes (tens
#: of milliseconds on a loaded machine), during which workers go on playing
MOVE_DELAY = "0.05"

LOGGING_EPISODE_TEST = (
    EPISODE_TEST
    + """

@pytest.fixture(autouse=True)
def played_log(request):
    with open(os.environ["PLAYED_LOG"], "a") as log:
        log.write(request.node.name + "\\n")
    yield
"""
)


@pytest.mark.slow
def test_first_write_error_stops_every_worker_at_once(launcher: Launcher) -> None:
    launcher.write_episode_test()
    (launcher.folder / "test_eps.py").write_text(LOGGING_EPISODE_TEST)
    played_log = launcher.folder / "played.log"
    run = launcher.start(
        "-n",
        str(WORKERS),
        f"--openenv-env={ENV}",
        f"--openenv-n={N}",
        "test_eps.py",
        env={"FAULT_DELAY": MOVE_DELAY, "PLAYED_LOG": str(played_log)},
    )
    assert run.wait_rows(3)
    run.signal_controller(signal.SIGSTOP)
    size = (launcher.output / "results.jsonl").stat().st_size
    resource.prlimit(run.proc.pid, resource.RLIMIT_FSIZE, (size + 50, size + 50))
    started_before_error = len(played_log.read_text().splitlines())
    run.signal_controller(signal.SIGCONT)
    finished = run.wait()
    finished.assert_clean()

    assert finished.returncode != 0
    results, failures = launcher.output / "results.jsonl", launcher.output / "failures.jsonl"
    named = [
        f"cannot write to {path}: File too large" in finished.stdout for path in (results, failures)
    ]
    assert any(named), finished.stdout[-3000:]  # the error names the file that filled up
    assert "could not be saved" in finished.stdout
    started = played_log.read_text().splitlines()
    assert len(started) == len(set(started))
    assert len(started) - started_before_error <= MOST_AFTER_ERROR, (
        f"{len(started) - started_before_error} episodes were started after the write error"
    )
    saved = read_rows(results) + read_rows(failures)
    assert set(episode_ids(saved)) <= {name.partition("[")[2].rstrip("]") for name in started}
