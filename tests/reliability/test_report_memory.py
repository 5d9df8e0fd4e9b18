"""The controller keeps little per episode: what pytest holds for each report is slimmed.

``bench/memory.py`` measures the effect at 20,000 episodes; these tests pin the
mechanism on a small run and check nothing users see is lost: the summary line,
failure details, ``--durations``.
"""

from __future__ import annotations

import json
import os

import pytest
from faults import ENV, Launcher

#: a probe in the run's folder: what the controller still holds once the session is over
PROBE = """
import json

from pytest_openenv.episode.outcome import outcome_of


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        return
    stats = config.pluginmanager.get_plugin("terminalreporter").stats
    episode = [r for reports in stats.values() for r in reports if outcome_of(r) is not None]
    passed = [r for r in episode if r.passed]
    with open("held.json", "w") as out:
        json.dump({
            "phase_reports": sum(r.when in ("setup", "teardown") for r in episode),
            "call_reports": sum(r.when == "call" for r in episode),
            "node_ids": len({id(getattr(r, "id", r.nodeid)) for r in episode}),
            "locations": len({id(r.location) for r in episode}),
            "passed_with_keywords": sum(bool(r.keywords) for r in passed),
            "passed_with_brief": sum(outcome_of(r).has_figures for r in passed),
            "failed_with_details": sum(bool(r.longrepr) for r in episode if r.failed),
            "failed": sum(r.failed for r in episode),
        }, out)
"""

N = 6
#: the first-legal teacher, which loses seeds 1, 4 and 5 to the random opponent
RUN = (f"--openenv-env={ENV}", f"--openenv-n={N}", "--openenv-policy=scripted", "-p", "held_probe")


def probe_env(launcher: Launcher) -> dict[str, str]:
    """The probe importable, ahead of (not instead of) the PYTHONPATH the suite runs with."""
    paths = [str(launcher.folder), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(path for path in paths if path)}


def held(launcher: Launcher) -> dict[str, int]:
    return json.loads((launcher.folder / "held.json").read_text())


@pytest.mark.slow
def test_passed_reports_are_slimmed_and_shared_under_xdist(launcher: Launcher) -> None:
    (launcher.folder / "held_probe.py").write_text(PROBE)
    finished = launcher.run("-n", "2", *RUN, env=probe_env(launcher))
    assert finished.returncode == 1  # seeds 1, 4 and 5 lose
    counts = held(launcher)
    assert counts["failed"] == 3
    assert "3 failed, 3 passed" in finished.stdout  # the summary line still counts all
    assert counts["call_reports"] == N
    assert counts["phase_reports"] == 0  # passed setup/teardown reports are not kept
    assert counts["node_ids"] == N  # one parsed node id per episode, however many reports
    assert counts["passed_with_keywords"] == 0 and counts["passed_with_brief"] == 0
    assert counts["failed_with_details"] == counts["failed"]  # failures keep their story
    assert "FAILED (reward=-1" in finished.stdout


def test_durations_keep_every_phase_report(launcher: Launcher) -> None:
    (launcher.folder / "held_probe.py").write_text(PROBE)
    finished = launcher.run(*RUN, "--durations=0", "--durations-min=0", env=probe_env(launcher))
    assert finished.returncode == 1
    assert held(launcher)["phase_reports"] == 2 * N
    assert finished.stdout.count(" setup ") >= N  # episodes run in setup: their time shows


@pytest.mark.slow
def test_an_episode_s_reports_from_a_worker_share_one_node_id_and_location(
    launcher: Launcher,
) -> None:
    (launcher.folder / "held_probe.py").write_text(PROBE)
    finished = launcher.run("-n", "2", *RUN, "--durations=0", env=probe_env(launcher))
    assert finished.returncode == 1
    counts = held(launcher)
    assert counts["phase_reports"] == 2 * N  # all three reports of each episode are kept ...
    assert counts["node_ids"] == N  # ... and rebuilt around one parsed node id
    assert counts["locations"] == N
