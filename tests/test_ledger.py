"""The run's ledger: one entry per episode, every figure a view of its entries.

An entry is decided by one attempt and replaced by a later one that decides again
(a replay), amended by pytest-rerunfailures' later attempts, preloaded from an earlier
run's rows that wait until their item is reached, and made for a crashed worker's item
from its id. A ledger built from a finished folder's rows alone gives the figures the
run itself wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl

from pytest_openenv.config.settings import LLMSettings, OutputSettings, RunSettings, Settings
from pytest_openenv.controller.accounts import Accounts
from pytest_openenv.episode.outcome import EpisodeOutcome
from pytest_openenv.episode.service import EpisodeService
from pytest_openenv.report.arms import ArmAccounts
from pytest_openenv.report.ledger import KEPT, PLAYED, RESUMED, Counts, Entry, Ledger
from pytest_openenv.report.passk import PassKTally
from pytest_openenv.report.tally import RunClock, Tally

TEST = "test_x.py::test_ep"
ENV = "openspiel:tic_tac_toe"


def nodeid(index: int, repeat: int | None = None) -> str:
    suffix = f"-r{repeat}" if repeat is not None else ""
    return f"{TEST}[ep-{index:06d}{suffix}]"


def played(index: int, outcome: str, *, reward: float = 1.0, **fields: Any) -> Entry:
    return Entry(
        nodeid(index),
        f"ep-{index:06d}",
        outcome=outcome,
        judged=outcome != "errored",
        verdict=outcome == "passed",
        reward=None if outcome == "errored" else reward,
        turns=None if outcome == "errored" else 3,
        arm="random",
        env=ENV,
        policy="random",
        seed=index,
        **fields,
    )


def row(index: int, *, reward: float = 1.0, failure: str | None = None, **extra: Any) -> dict:
    """A saved row of the episode (``failure``: its failures.jsonl outcome)."""
    saved: dict[str, Any] = {
        "episode_id": f"ep-{index:06d}",
        "test": nodeid(index),
        "env": ENV,
        "policy": "random",
        "model": None,
        "seed": index,
        "reward": reward,
        "metrics": {"turns": 4, "prompt_tokens": 10, "completion_tokens": 5},
        "verify_metrics": {"verdict": failure is None, "outcome": "win"},
        "extra": extra,
    }
    if failure is not None:
        saved["failure"] = {"outcome": failure, "message": "why"}
    return saved


def fold(ledger: Ledger) -> dict[str, Any]:
    return Counts.of(ledger.counted()).counted_figures()


def test_a_later_attempt_that_decides_replaces_the_entry_and_the_totals_follow() -> None:
    ledger = Ledger()
    ledger.record(played(0, "failed", reward=0.0))
    ledger.record(played(1, "passed"))
    assert (ledger.totals.passed, ledger.totals.failed) == (1, 1)
    ledger.record(played(0, "passed", attempt=2))  # the failure played again
    assert (ledger.totals.passed, ledger.totals.failed, ledger.totals.total) == (2, 0, 2)
    assert ledger.totals.reward.mean == 1.0
    assert ledger.attempts() == 2
    assert ledger.totals.counted_figures() == fold(ledger)
    # listed in the order counted: the replayed episode last
    assert [entry.nodeid for entry in ledger.counted()] == [nodeid(1), nodeid(0)]


def test_a_rerun_amends_the_first_attempt_which_stays_the_figure() -> None:
    ledger = Ledger()
    ledger.record(played(2, "failed", reward=0.0, prompt_tokens=7, rerun=True, test_failed=True))

    def later(entry: Entry) -> None:
        entry.passed_on_rerun = True
        entry.prompt_tokens += 7

    assert ledger.amend(nodeid(2), later) is not None
    assert (ledger.totals.failed, ledger.totals.passed, ledger.totals.total) == (1, 0, 1)
    assert (ledger.totals.rerun, ledger.totals.passed_on_rerun) == (1, 1)
    assert ledger.totals.prompt_tokens == 14  # both attempts were spent
    assert ledger.failed_tests() == {nodeid(2)}
    assert ledger.amend(nodeid(9), later) is None  # nothing counted to add to
    assert ledger.totals.counted_figures() == fold(ledger)


def test_earlier_rows_wait_uncounted_until_their_item_is_reached_or_the_run_ends() -> None:
    ledger = Ledger()
    ledger.add_row(row(0), failure_file=False, counted=False)
    ledger.add_row(row(1, reward=0.0, failure="failed"), failure_file=True, counted=False)
    ledger.add_row(row(2, reward=0.0, failure="error"), failure_file=True, counted=False)
    # a pass of the same test wins over its failure row
    ledger.add_row(row(0, reward=0.0, failure="failed"), failure_file=True, counted=False)
    assert ledger.totals.total == 0 and list(ledger.counted()) == []
    assert ledger.reveal(nodeid(0)) is not None  # its item's skip came
    assert ledger.reveal(nodeid(0)) is None  # counted once
    assert (ledger.totals.passed, ledger.totals.resumed) == (1, 1)
    revealed = ledger.reveal_rest()
    assert sorted(entry.nodeid for entry in revealed) == [nodeid(1), nodeid(2)]
    tally = Tally.of_ledger(ledger, RunClock())
    assert (tally.passed, tally.failed, tally.errored) == (1, 1, 1)
    assert (tally.resumed, tally.earlier_failures, tally.played) == (1, 2, 0)
    # an earlier run's spend is not this run's; an errored row carries no reward
    assert tally.prompt_tokens == 0 and tally.reward.count == 2
    origins = {entry.nodeid: entry.origin for entry in ledger.counted()}
    assert origins == {nodeid(0): RESUMED, nodeid(1): KEPT, nodeid(2): KEPT}


def settings_for(**output: Any) -> Settings:
    return Settings(
        run=RunSettings(env=ENV, policy="random"), output=OutputSettings(resume=True, **output)
    )


def call_report(index: int, word: str, *, rerun: int = 0, figures: bool = True) -> Any:
    episode_id = f"ep-{index:06d}"
    outcome = EpisodeOutcome(episode_id)
    if figures:
        line = json.dumps(row(index, failure=None if word == "passed" else "failed"))
        outcome = EpisodeOutcome.of_row(episode_id, json.loads(line), line)
    fields = {"openenv_outcome": outcome, "rerun": rerun}
    return pytest.TestReport(nodeid(index), ("t", 0, "t"), {}, word, None, "call", **fields)  # type: ignore[arg-type]


def skip_report(index: int) -> Any:
    fields = {"openenv_outcome": EpisodeOutcome(f"ep-{index:06d}")}
    return pytest.TestReport(nodeid(index), ("t", 0, "t"), {}, "skipped", None, "setup", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("replay", [False, True], ids=["resume", "resume-failed"])
def test_a_resume_preloads_the_folder_and_a_replay_is_the_next_attempt(replay: bool) -> None:
    ledger = Ledger()
    ledger.add_row(row(0), failure_file=False, counted=False)
    ledger.add_row(row(1, failure="failed", attempt=2), failure_file=True, counted=False)
    books = Accounts(settings_for(resume_failed=replay), EpisodeService(settings_for()), ledger)
    books.count(skip_report(0))  # the pass is kept
    if replay:  # the failure plays again: the third attempt, its row says so
        saved = books.count(call_report(1, "passed"))
        assert saved is not None and json.loads(saved.line)["extra"]["attempt"] == 3
    else:  # the finished failure is kept as it is
        assert books.count(skip_report(1)) is None
    books.count_rest_of_folder()
    tally = books.tally
    assert tally.total == 2 and tally.resumed == 1
    if replay:
        assert (tally.passed, tally.failed, tally.attempts) == (2, 0, 3)
        assert books.kept_counted == 0 and tally.earlier_failures == 0
    else:
        assert (tally.passed, tally.failed, tally.attempts) == (1, 1, 2)
        assert books.kept_counted == 1 and tally.earlier_failures == 1
    assert books.reported == {nodeid(0), nodeid(1)}


def test_a_crashed_item_is_an_errored_entry_from_its_id_alone() -> None:
    """No sibling played: the item id and the run's settings give the episode's spec, and
    the entry is errored in the run, its group and pass@k, never missing."""
    settings = Settings(
        run=RunSettings(env=ENV, policy="openai", policies=("openai",), seed=50),
        llm=LLMSettings(model="org/a", models=("org/a", "org/b")),
    )
    books = Accounts(settings, EpisodeService(settings))
    crashed = f"{TEST}[org_b-ep-000003]"
    crash = pytest.TestReport(crashed, ("t", None, "t"), {}, "failed", "node down", "???")
    books.decorate_crash_report(crash, crashed)
    books.count(crash)
    entry = books.ledger.get(crashed)
    assert entry is not None and entry.outcome == "errored" and entry.origin == PLAYED
    assert (entry.arm, entry.model, entry.seed) == ("org/b", "org/b", 53)
    assert books.tally.errored == 1 and books.passk.result().problems == 1
    assert books.arms.arms["org/b"].errored == 1
    assert books.failed_episodes == set()  # a crash is no verdict a gate could excuse


SUITE = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=6, policy="random", seed=3)
def test_random(episode):
    assert episode.passed, episode.explain()

@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policy="expert")
def test_expert(episode):
    assert episode.passed, episode.explain()
"""


def from_files(folder: Path) -> Ledger:
    ledger = Ledger()
    for name, failure_file in (("results.jsonl", False), ("failures.jsonl", True)):
        for saved in read_jsonl(folder / name):
            ledger.add_row(saved, failure_file=failure_file, played=True)
    return ledger


FIGURES = (
    "episodes",
    "passed",
    "failed",
    "errored",
    "verdict_passed",
    "test_passed_verdict_failed",
    "test_failed_verdict_passed",
    "train_rows",
    "prompt_tokens",
    "completion_tokens",
    "pass_rate",
    "mean_reward",
    "mean_turns",
    "envs",
    "policies",
)


@pytest.mark.slow
def test_a_ledger_built_from_the_folder_gives_the_figures_the_run_wrote(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """What merging folders will rely on: rows read back, the same views, the same figures
    as summary.json (whole run, each group, pass@k)."""
    pytester.makepyfile(test_two=SUITE)
    result = run_pytest("-n", "0", "-p", "no:randomly", "--openenv-repeats=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # random loses some games
    folder = pytester.path / "openenv-results"
    summary = json.loads((folder / "summary.json").read_text())
    ledger = from_files(folder)
    figures = Tally.of_ledger(ledger, RunClock()).figures()
    assert summary["figures"]["failed"] > 0 and summary["figures"]["passed"] > 0
    assert {key: figures[key] for key in FIGURES} == {
        key: pytest.approx(summary["figures"][key]) for key in FIGURES
    }
    groups = ArmAccounts.of_ledger(ledger.counted(), ["random"], 2).groups_json()
    assert [(g["test"], g["env"], g["policy"]) for g in groups] == [
        (g["test"], g["env"], g["policy"]) for g in summary["groups"]
    ]
    for mine, written in zip(groups, summary["groups"], strict=True):
        for key in ("ran", "passed", "failed", "errored", "pass_rate", "mean_reward", "passk"):
            assert mine[key] == pytest.approx(written[key]), (mine["label"], key)
    assert PassKTally.of(ledger.counted(), 2).result().to_json() == pytest.approx(summary["passk"])
