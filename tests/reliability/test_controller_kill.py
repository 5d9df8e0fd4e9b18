"""The controller is SIGKILLed at points hypothesis picks, several times; resume finishes.

Whatever was on disk before a kill is still there after every later run, every
line is whole after every kill, and the final ``results.jsonl`` holds each passing
episode exactly once with the same content an uninterrupted run writes.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from faults import ENV, Launcher, count_rows, read_rows
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

N = 30
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "test_eps.py")
#: slow enough that kills land between rows; a pause before the final rewrite makes
#: "all rows appended, nothing finalized" a state a kill can hit
#: slow enough that kills land between rows, plus a pause before the final rewrite so a
#: kill can hit "every row appended, nothing finalized" (see faults.FAULT_CONFTEST)
SLOW = {"FAULT_DELAY": "0.005", "FAULT_FINISH_DELAY": "0.5"}

#: what to wait for before the kill: a number of rows on disk (counted from the rows
#: already there), or seconds after the start (covers startup, the run and finalize)
kill_point = st.one_of(
    st.tuples(st.just("rows"), st.integers(0, N)),
    st.tuples(st.just("seconds"), st.floats(0.2, 3.0)),
)


def stable(row: dict[str, Any]) -> dict[str, Any]:
    """A row without what legitimately differs between two runs of one episode."""
    metrics = {k: v for k, v in row["metrics"].items() if k != "wall_time_s"}
    return {**row, "metrics": metrics}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What one uninterrupted run writes: passing rows by episode id, plus failing ids."""
    launcher = Launcher(tmp_path_factory.mktemp("reference") / "work")
    launcher.folder.mkdir()
    launcher.write_episode_test()
    try:
        finished = launcher.run(*RUN)
    finally:
        launcher.close()
    assert finished.returncode in (0, 1), finished.stdout[-3000:]
    results = read_rows(launcher.output / "results.jsonl")
    failures = read_rows(launcher.output / "failures.jsonl")
    assert results and failures  # the suite exercises both files
    assert len(results) + len(failures) == N
    return {
        "passed": {row["episode_id"]: stable(row) for row in results},
        "failed": {row["episode_id"]: stable(row) for row in failures},
    }


def kill_controller(
    launcher: Launcher, point: tuple[str, float], workers: str, resume: bool
) -> str:
    """Start a run and SIGKILL its controller at ``point``; say what phase the kill hit."""
    args = ["-n", workers, *RUN] + (["--openenv-resume"] if resume else [])
    finishing = launcher.folder / "finishing"
    finishing.unlink(missing_ok=True)
    # a resumed run appends one row per episode not yet passed
    to_run = N - len(ids_on_disk(launcher.output)) if resume else N
    start_rows = count_rows(launcher.output)
    run = launcher.start(*args, env=SLOW)
    kind, amount = point
    if kind == "rows":
        run.wait_rows(start_rows + min(int(amount), to_run))  # False if the run ended first
    else:
        deadline = run.started + amount
        while time.monotonic() < deadline and run.proc.poll() is None:
            time.sleep(0.005)
    run.signal_controller(signal.SIGSTOP)  # tell where the kill lands, race-free
    alive = run.proc.poll() is None
    phase = "after every row, before the final rewrite" if finishing.exists() else "mid-run"
    run.signal_controller(signal.SIGKILL)
    run.proc.wait()
    run.signal_group(signal.SIGKILL)  # its xdist workers, orphaned by the kill
    return phase if alive else "after the run ended"


def ids_on_disk(output: Path) -> set[str]:
    """Reads both files, failing on a torn line."""
    rows = read_rows(output / "results.jsonl") + read_rows(output / "failures.jsonl")
    return {row["episode_id"] for row in rows if row["passed"]}


@settings(
    max_examples=2,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(kills=st.lists(kill_point, min_size=1, max_size=2), workers=st.sampled_from(["0", "2"]))
@example(kills=[("rows", 6), ("rows", N)], workers="2")  # mid-run, then before finalize
@example(kills=[("rows", 0), ("seconds", 1.5), ("rows", 3)], workers="0")
@pytest.mark.slow
def test_killed_controller_then_resume_keeps_every_episode_once(
    tmp_path_factory: pytest.TempPathFactory,
    reference: dict[str, dict[str, Any]],
    kills: list[tuple[str, float]],
    workers: str,
) -> None:
    launcher = Launcher(tmp_path_factory.mktemp("kill") / "work")
    launcher.folder.mkdir()
    launcher.write_episode_test()
    try:
        kept: set[str] = set()
        for number, point in enumerate(kills):
            event(f"kill landed {kill_controller(launcher, point, workers, number > 0)}")
            now = ids_on_disk(launcher.output)  # every line whole right after the kill
            assert kept <= now, f"rows lost after kill {number}: {sorted(kept - now)}"
            kept = now
        finished = launcher.run("-n", workers, *RUN, "--openenv-resume")
    finally:
        launcher.close()

    assert finished.returncode == 1, finished.stdout[-3000:]  # the losing episodes fail
    results = read_rows(launcher.output / "results.jsonl")
    ids = [row["episode_id"] for row in results]
    assert ids == sorted(reference["passed"]), "each passing episode exactly once, sorted"
    assert kept <= set(ids)
    for row in results:
        assert stable(row) == reference["passed"][row["episode_id"]]
    failures = read_rows(launcher.output / "failures.jsonl")
    assert [row["episode_id"] for row in failures] == sorted(reference["failed"])
    # no temp file of a rewrite that a kill interrupted is left behind
    assert not [p.name for p in launcher.output.iterdir() if ".tmp-" in p.name]
