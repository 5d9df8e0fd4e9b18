"""Each episode counts once, with its final outcome, over the whole dataset; JUnit agrees.

- pytest-rerunfailures logs every attempt: a failed attempt that passes on rerun
  must not count as a failure (it flipped the gate) nor leave a failures.jsonl row.
- ``--openenv-resume`` skips the episodes that finished (passed or failed): the gate and
  the card must still count them, each by its first attempt, not only the episodes re-run.
- With a gate that passes (exit 0), ``--junitxml`` must not report the episodes the
  gate accepted as failures or errors (JUnit-reading CI would go red); with a gate that
  fails it stays as pytest wrote it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from faults import ENV, Launcher, episode_ids, read_rows

#: Episodes that fail (assertion) or error (policy unavailable) on the seeds the
#: environment names; FLAKY_SEEDS fail only on their first attempt in this folder.
SUITE = """
import os
from pathlib import Path

import pytest

from pytest_openenv.policies.base import PolicyUnavailable
from pytest_openenv.policies.scripted import ScriptedPolicy


def seeds(name):
    return {int(s) for s in os.environ.get(name, "").split(",") if s}


class Steered(ScriptedPolicy):
    def act(self, turn):
        if turn.seed in seeds("ERROR_SEEDS"):
            raise PolicyUnavailable("injected: the endpoint is down")
        return super().act(turn)


@pytest.fixture
def openenv_policy():
    return Steered()


def test_ep(episode):
    attempt = Path(f"attempted-{episode.episode_id}")
    first = not attempt.exists()
    attempt.touch()
    if episode.seed in seeds("SKIP_SEEDS"):
        pytest.skip("this seed does not apply")
    if episode.seed in seeds("INTERRUPT_SEEDS"):
        raise KeyboardInterrupt  # what Ctrl-C raises in the main thread
    if first and episode.seed in seeds("FLAKY_SEEDS"):
        pytest.fail("flaky: fails on its first attempt only")
    assert episode.seed not in seeds("FAIL_SEEDS"), "this seed is set to fail"


if os.environ.get("XFAIL"):
    test_ep = pytest.mark.xfail(reason="a known weak policy")(test_ep)
"""


def suite(launcher: Launcher) -> None:
    (launcher.folder / "test_suite.py").write_text(SUITE)


def run(launcher: Launcher, *args: str, **env: str) -> Any:
    # every game passes (a loss too): the suite's seeds decide what fails
    common = ["test_suite.py", f"--openenv-env={ENV}", "--openenv-n=4", "--openenv-min-reward=-1"]
    return launcher.run(*common, *args, env=env)


def figures(launcher: Launcher) -> dict[str, Any]:
    return json.loads((launcher.output / "summary.json").read_text())["figures"]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_a_rerun_that_passes_counts_by_its_first_attempt(launcher: Launcher, workers: str) -> None:
    """With --reruns the attempt that finally passed made pass@1 best-of-N.

    Each episode counts once, by its first attempt (its row is the one written); the
    summary and the card say reruns were used and how many passed on a later attempt.
    """
    suite(launcher)
    finished = run(
        launcher, "-n", workers, "-p", "rerunfailures", "--reruns=1",
        "--openenv-min-pass-rate=0.75", FLAKY_SEEDS="0,1",
    )  # fmt: skip
    assert "RERUN" in finished.stdout or "2 rerun" in finished.stdout, finished.stdout[-2000:]
    assert finished.returncode == 1, finished.stdout[-3000:]  # pass@1 is 2/4, not 4/4
    got = figures(launcher)
    assert (got["passed"], got["failed"], got["errored"], got["ran"]) == (2, 2, 0, 4), got
    assert (got["rerun"], got["passed_on_rerun"]) == (2, 2), got
    assert len(read_rows(launcher.output / "results.jsonl")) == 2
    failures = read_rows(launcher.output / "failures.jsonl")
    assert episode_ids(failures) == ["ep-000000", "ep-000001"]
    assert all("flaky" in row["failure"]["message"] for row in failures)
    assert "episodes: 2 passed, 2 failed" in finished.stdout
    assert "pass@1 = 50.0% (2/4)" in finished.stdout
    assert "2 episode(s) re-run, 2 passed on a later attempt" in finished.stdout
    card = (launcher.output / "README.md").read_text()
    assert "2 episode(s) re-run by pytest-rerunfailures" in card, card


def test_a_rerun_that_fails_again_counts_once_as_failed(launcher: Launcher) -> None:
    suite(launcher)
    finished = run(launcher, "-p", "rerunfailures", "--reruns=2", FAIL_SEEDS="3")
    assert finished.returncode == 1
    got = figures(launcher)
    assert (got["passed"], got["failed"], got["ran"]) == (3, 1, 4), got
    [row] = read_rows(launcher.output / "failures.jsonl")
    assert row["episode_id"] == "ep-000003"


@pytest.mark.slow
def test_resume_gates_and_cards_the_whole_dataset(launcher: Launcher) -> None:
    suite(launcher)
    first = run(launcher, FAIL_SEEDS="2,3")
    assert first.returncode == 1
    # the failed episodes finished: a resume keeps them, each counted by its first attempt
    second = run(launcher, "--openenv-resume", "--openenv-min-pass-rate=0.5", FAIL_SEEDS="3")
    assert second.returncode == 0, second.stdout[-3000:]
    got = figures(launcher)
    assert (got["passed"], got["failed"], got["ran"], got["played"]) == (2, 2, 4, 0), got
    assert got["mean_turns"] is not None and got["mean_reward"] is not None
    card = (launcher.output / "README.md").read_text()
    assert "| episodes | 4 (2 passed, 2 failed, 0 errored, 0 skipped)" in card, card
    assert "2 of the passed from the earlier run" in second.stdout
    # replaying them is asked for: seed 2 passes now, and the dataset is best of 2 attempts
    best_of = ("--openenv-resume", "--openenv-resume-failed", "--openenv-gate-best-of")
    third = run(launcher, *best_of, "--openenv-min-pass-rate=0.7", FAIL_SEEDS="3")
    assert third.returncode == 0, third.stdout[-3000:]
    got = figures(launcher)
    assert (got["passed"], got["failed"], got["ran"], got["resumed"]) == (3, 1, 4, 2), got
    assert got["pass_rate"] == 0.75 and got["attempts"] == 2
    assert "best of up to 2 attempts" in third.stdout
    assert len(read_rows(launcher.output / "results.jsonl")) == 3
    # and the other way: a gate the dataset misses fails although the re-runs all pass
    fourth = run(launcher, *best_of, "--openenv-min-pass-rate=0.9", FAIL_SEEDS="3")
    assert fourth.returncode == 1, fourth.stdout[-3000:]
    assert figures(launcher)["ran"] == 4


def junit(launcher: Launcher) -> tuple[ET.Element, dict[str, ET.Element]]:
    root = ET.parse(launcher.folder / "junit.xml").getroot()
    suite_node = next(root.iter("testsuite"))
    return suite_node, {case.get("name", ""): case for case in suite_node.iter("testcase")}


def test_junit_agrees_with_a_passing_gate(launcher: Launcher) -> None:
    suite(launcher)
    finished = run(
        launcher, "--junitxml=junit.xml", "--openenv-min-pass-rate=0.5",
        FAIL_SEEDS="1", ERROR_SEEDS="2",
    )  # fmt: skip
    assert finished.returncode == 0, finished.stdout[-3000:]
    node, cases = junit(launcher)
    assert (node.get("failures"), node.get("errors"), node.get("skipped")) == ("0", "0", "2")
    assert node.get("tests") == "4"
    for name, said in (("test_ep[ep-000001]", "failed"), ("test_ep[ep-000002]", "errored")):
        [skipped] = cases[name].findall("skipped")
        assert skipped.get("type") == "openenv.gated"
        message = skipped.get("message", "")
        assert "accepted by the openenv gate" in message and said in message, message
        assert not cases[name].findall("failure") and not cases[name].findall("error")
    assert "injected: the endpoint is down" in (cases["test_ep[ep-000002]"][0].text or "")
    assert not cases["test_ep[ep-000000]"].findall("skipped")


def test_junit_keeps_failures_when_the_gate_fails(launcher: Launcher) -> None:
    suite(launcher)
    finished = run(launcher, "--junitxml=junit.xml", "--openenv-min-pass-rate=0.9", FAIL_SEEDS="1")
    assert finished.returncode == 1
    node, cases = junit(launcher)
    assert node.get("failures") == "1" and node.get("skipped") == "0"
    assert cases["test_ep[ep-000001]"].findall("failure")


@pytest.mark.slow
def test_a_skip_in_the_test_body_counts_as_skipped(launcher: Launcher) -> None:
    """``pytest.skip()`` in the body was a failed episode with a tuple repr."""
    suite(launcher)
    finished = run(launcher, "-n", "2", "--openenv-min-pass-rate=0.9", SKIP_SEEDS="1,2,3")
    assert finished.returncode == 0, finished.stdout[-3000:]
    assert "1 passed, 3 skipped" in finished.stdout
    got = figures(launcher)
    assert (got["passed"], got["failed"], got["skipped"], got["ran"]) == (1, 0, 3, 1), got
    assert got["pass_rate"] == 1.0
    assert read_rows(launcher.output / "failures.jsonl") == []
    assert "episodes: 1 passed, 0 failed, 0 errored, 3 skipped" in finished.stdout


@pytest.mark.slow
def test_the_summary_says_pytest_exits_1_only_when_it_does(launcher: Launcher) -> None:
    """Under xfail (exit 0) and Ctrl-C (exit 2) the summary said "exits 1"."""
    suite(launcher)
    xfailed = run(launcher, FAIL_SEEDS="1", XFAIL="1")
    assert xfailed.returncode == 0, xfailed.stdout[-3000:]
    assert "1 xfailed" in xfailed.stdout and "1 failed, 0 errored" in xfailed.stdout
    assert "exits 1" not in xfailed.stdout, xfailed.stdout[-3000:]

    interrupted = run(launcher, FAIL_SEEDS="0,1", INTERRUPT_SEEDS="2")
    assert interrupted.returncode == 2, interrupted.stdout[-3000:]
    assert "episodes: 0 passed, 2 failed" in interrupted.stdout
    assert "exits 1" not in interrupted.stdout, interrupted.stdout[-3000:]

    failed = run(launcher, FAIL_SEEDS="1")
    assert failed.returncode == 1
    assert "1 episode(s) failed, so pytest exits 1" in failed.stdout
