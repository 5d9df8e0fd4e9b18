"""Two runs into one folder: the second is refused (exit 4) naming the first's pid and host.

Without the lock both appended to one ``results.jsonl`` and each rewrote it at its
end, so one run's summary counted rows of the other. The lock is an ``flock``
held by the controller for the whole run: a killed run's lock is free at once,
and the next run takes it over with a warning.
"""

from __future__ import annotations

import signal
import socket
import time

import pytest
from faults import ENV, Launcher, episode_ids, read_rows

N = 30
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py", "--openenv-min-reward=-1")
SLOW = {"FAULT_DELAY": "0.03"}

#: The first run holds the folder at its session end until the test lets it go, so the
#: second run surely meets a live holder, however long its workers take to start.
HOLDING_CONFTEST = """
import os
import time

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if os.environ.get("HOLD_UNTIL") and not hasattr(session.config, "workerinput"):
        open("finishing", "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.environ["HOLD_UNTIL"]) and time.monotonic() < deadline:
            time.sleep(0.05)
"""


@pytest.mark.parametrize("second", [(), ("--openenv-resume",), ("-n", "2")])
@pytest.mark.slow
def test_second_run_into_a_busy_folder_is_refused(
    launcher: Launcher, second: tuple[str, ...]
) -> None:
    launcher.write_episode_test()
    (launcher.folder / "conftest.py").write_text(HOLDING_CONFTEST)
    release = launcher.folder / "release"
    first = launcher.start(*RUN, env={"HOLD_UNTIL": str(release)})
    assert first.wait_rows(N)
    while not (launcher.folder / "finishing").exists():
        assert first.proc.poll() is None, first.read()[0][-3000:]
        time.sleep(0.01)

    refused = launcher.run(*RUN, *second, "--openenv-seed=100", env={"HOLD_UNTIL": ""})
    release.touch()
    assert refused.returncode == 4, refused.text[-3000:]
    assert f"pid {first.proc.pid} on {socket.gethostname()}" in refused.stderr, refused.stderr
    assert "is in use by another run" in refused.stderr
    assert "test_ep[" not in refused.stdout  # no episode ran

    finished = first.wait()
    finished.assert_clean()
    assert finished.returncode == 0, finished.stdout[-3000:]
    rows = read_rows(launcher.output / "results.jsonl")
    assert episode_ids(rows) == [f"ep-{i:06d}" for i in range(N)]
    assert {row["seed"] for row in rows} == set(range(N))  # none of the refused run's
    assert not (launcher.output / ".openenv.lock").exists()


@pytest.mark.slow
def test_lock_of_a_killed_run_is_taken_over_with_a_warning(launcher: Launcher) -> None:
    launcher.write_episode_test()
    killed = launcher.start(*RUN, env=SLOW)
    assert killed.wait_rows(2)
    killed.signal_group(signal.SIGKILL)
    killed.wait()
    assert (launcher.output / ".openenv.lock").exists()  # left behind, but nobody holds it

    resumed = launcher.run(*RUN, "--openenv-resume")
    assert resumed.returncode == 0, resumed.text[-3000:]
    assert f"pid {killed.proc.pid}" in resumed.stdout
    assert "ended without releasing it; this run took it over" in resumed.stdout
    rows = read_rows(launcher.output / "results.jsonl")
    assert episode_ids(rows) == [f"ep-{i:06d}" for i in range(N)]
    assert not (launcher.output / ".openenv.lock").exists()
