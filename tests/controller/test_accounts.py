"""``Accounts``: each episode report counted once, with its final outcome."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pytest_openenv.config.settings import RunSettings, Settings
from pytest_openenv.controller.accounts import Accounts, episode_id_from_nodeid, only_marks_reported
from pytest_openenv.episode.outcome import EpisodeOutcome, outcome_of
from pytest_openenv.episode.record import dumps_record, placeholder_row
from pytest_openenv.episode.service import EpisodeService
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.report.ledger import Ledger

ENV = "openspiel:tic_tac_toe"
TEST = "test_x.py::test_ep"


def accounts(earlier: dict[str, dict[str, Any]] | None = None, **run: Any) -> Accounts:
    """``earlier``: results.jsonl rows of an earlier run, by test (what they say of it)."""
    settings = Settings(run=RunSettings(**run))
    ledger = Ledger()
    for nodeid, said in (earlier or {}).items():
        row = {"test": nodeid, "metrics": {"turns": said.pop("turns", None)}, **said}
        ledger.add_row(row, failure_file=False, counted=False)
    return Accounts(settings, EpisodeService(settings), ledger)


def record(index: int, *, seed: int, reward: float = 1.0) -> str:
    spec = EpisodeSpec(
        env=ENV, index=index, seed=seed, repeat=0, repeats=1, policy="random", config="{}"
    )
    row = placeholder_row(spec, "why", test=f"{TEST}[{spec.episode_id}]")
    row["reward"] = reward
    return dumps_record(row)


def report(
    index: int, when: str, outcome_word: str, *, line: str | None = None, **extra: Any
) -> pytest.TestReport:
    nodeid = f"{TEST}[ep-{index:06d}]"
    episode_id = f"ep-{index:06d}"
    outcome = EpisodeOutcome(episode_id)
    if line is not None:
        outcome = EpisodeOutcome.of_row(episode_id, json.loads(line), line)
        # the row is a placeholder's: its test's outcome says whether it trains and passed
        passed = outcome_word == "passed"
        outcome = dataclasses.replace(outcome, prompt_tokens=7, train=True, verdict=passed)
    fields: dict[str, Any] = {"openenv_outcome": outcome, **extra}
    location = ("test_x.py", 0, "test_ep")
    return pytest.TestReport(nodeid, location, {}, outcome_word, None, when, **fields)  # type: ignore[arg-type]


def written_line(report: pytest.TestReport) -> str | None:
    """The row text a report still holds once counted (None: taken off it)."""
    outcome = outcome_of(report)
    assert outcome is not None
    return outcome.line


def test_a_passed_call_is_counted_and_its_row_taken_off_the_report() -> None:
    books = accounts()
    books.count(report(0, "setup", "passed"))
    passed = report(0, "call", "passed", line=record(0, seed=0, reward=1.0))
    row = books.count(passed)
    assert row is not None and row.passed
    assert row.key == ("ep-000000", f"{TEST}[ep-000000]")
    assert json.loads(row.line)["reward"] == 1.0
    assert written_line(passed) is None  # the controller keeps no transcript
    books.count(report(0, "teardown", "passed"))
    tally = books.tally
    assert (tally.passed, tally.failed, tally.errored) == (1, 0, 0)
    assert tally.reward.mean == 1.0 and tally.prompt_tokens == 7
    assert tally.envs == {ENV} and tally.policies == {"random"}
    assert books.active and books.failed_episodes == set()


def test_a_setup_error_is_an_errored_episode_written_as_a_failure() -> None:
    books = accounts()
    row = books.count(report(1, "setup", "failed", line=record(1, seed=1)))
    assert row is not None and not row.passed
    assert books.tally.errored == 1 and books.failed_episodes == {f"{TEST}[ep-000001]"}
    assert books.passk.result().problems == 1
    assert books.other_failures == 0  # the gate may excuse it


def test_an_episode_counts_by_its_first_attempt_under_reruns() -> None:
    """pytest-rerunfailures' first attempt decides pass@1; later ones count
    nothing and write nothing (the one that finally passed made pass@1 best-of-N)."""
    books = accounts()
    first = report(2, "call", "rerun", line=record(2, seed=2), rerun=0)
    row = books.count(first)
    assert row is not None and not row.passed  # its row goes to failures.jsonl
    assert books.tally.failed == 1 and books.tally.rerun == 1
    assert books.failed_episodes == {f"{TEST}[ep-000002]"}
    later = report(2, "call", "passed", line=record(2, seed=2, reward=1.0), rerun=1)
    assert books.count(later) is None
    assert written_line(later) is None
    assert (books.tally.passed, books.tally.failed, books.tally.total) == (0, 1, 1)
    assert books.tally.passed_on_rerun == 1
    assert books.tally.prompt_tokens == 14  # both attempts' tokens were spent
    assert books.passk.result().problems == 1


def test_failures_the_gate_never_excuses() -> None:
    books = accounts()
    books.count(report(3, "teardown", "failed"))  # an episode's teardown
    plain = pytest.TestReport(
        "test_y.py::test_plain", ("test_y.py", 0, "x"), {}, "failed", None, "call"
    )
    books.count(plain)  # a test that is not an episode
    assert books.other_failures == 2
    assert books.tally.total == 0


def test_a_resumed_pass_counts_once_as_passed_with_the_earlier_figures() -> None:
    nodeid = f"{TEST}[ep-000004]"
    earlier = {nodeid: {"reward": 0.5, "turns": 3, "env": ENV, "policy": "expert", "model": None}}
    books = accounts(earlier)
    books.count(report(4, "setup", "skipped"))
    books.count(report(4, "teardown", "passed"))
    assert (books.tally.passed, books.tally.resumed, books.tally.skipped) == (1, 1, 0)
    assert books.tally.reward.mean == 0.5 and books.tally.policies == {"expert"}
    books.count(report(5, "setup", "skipped"))  # skipped, with no earlier row
    assert books.tally.skipped == 1


def test_the_expected_count_is_taken_from_the_first_collection_only() -> None:
    books = accounts()
    assert not books.expect(["test_y.py::test_plain"])
    assert books.expected == 0
    assert not books.expect([f"{TEST}[ep-000000]"])  # a second worker's list changes nothing
    fresh = accounts()
    assert fresh.expect([f"{TEST}[ep-000000]", f"{TEST}[ep-000001-r2]", "test_y.py::test_plain"])
    assert fresh.expected == 2


def test_a_crashed_worker_s_report_is_given_its_episode_from_a_sibling() -> None:
    books = accounts(concurrency=4)
    books.count(report(0, "call", "passed", line=record(0, seed=100)))  # base seed 100
    crash = pytest.TestReport(
        f"{TEST}[ep-000007]",
        ("test_x.py", None, "test_x.py"),
        {},
        "failed",
        "worker 'gw0' crashed",
        "???",
    )
    books.decorate_crash_report(crash, crash.nodeid)
    outcome = outcome_of(crash)
    assert outcome is not None and outcome.line is not None
    row = json.loads(outcome.line)
    assert outcome.episode_id == "ep-000007"
    assert (row["env"], row["policy"], row["seed"]) == (ENV, "random", 107)
    assert "worker 'gw0' crashed" in row["failure"]["message"]
    assert "other episodes of that worker were in flight" in row["failure"]["message"]
    assert outcome.outcome == "error"
    books.count(crash)
    assert books.tally.errored == 1


def test_a_crash_of_an_item_that_is_no_episode_is_left_as_xdist_made_it() -> None:
    books = accounts()
    crash = pytest.TestReport(
        "test_y.py::test_plain", ("test_y.py", None, "x"), {}, "failed", "gone", "???"
    )
    books.decorate_crash_report(crash, crash.nodeid)
    assert outcome_of(crash) is None


@pytest.mark.parametrize(
    ("nodeid", "episode_id"),
    [
        ("t.py::test[ep-000012]", "ep-000012"),
        ("t.py::test[ep-000012-r3]", "ep-000012-r3"),
        ("t.py::test[smoke-ep-000001]", "ep-000001"),
        ("t.py::test[ep-000001-extra]", "ep-000001"),
        ("t.py::test[3]", None),
    ],
)
def test_episode_ids_are_read_from_node_ids(nodeid: str, episode_id: str | None) -> None:
    assert episode_id_from_nodeid(nodeid) == episode_id


def test_a_crashed_episode_of_one_of_several_models_keeps_its_model_and_id() -> None:
    from pytest_openenv.config.settings import LLMSettings

    settings = Settings(
        run=RunSettings(env=ENV, policy="openai", policies=("openai",), id_prefix="run1"),
        llm=LLMSettings(model="org/a", models=("org/a", "org/b")),
    )
    books = Accounts(settings, EpisodeService(settings))
    nodeid = f"{TEST}[run1-org_b-ep-000004]"
    crash = pytest.TestReport(nodeid, ("test_x.py", None, "x"), {}, "failed", "gone", "???")
    books.decorate_crash_report(crash, nodeid)
    outcome = outcome_of(crash)
    assert outcome is not None and outcome.line is not None
    row = json.loads(outcome.line)
    assert outcome.episode_id == row["episode_id"] == "run1-org_b-ep-000004"
    assert (row["policy"], row["model"], row["seed"]) == ("openai", "org/b", 4)
    books.count(crash)
    assert books.arms.arms["org/b"].errored == 1


def test_reports_counted_without_holding_interrupts_only_mark_their_test_reported() -> None:
    """The controller holds Ctrl-C while it counts a report and writes its row, except
    for the reports ``only_marks_reported`` picks: counting one changes nothing else."""
    line = record(0, seed=0)
    reports = [
        report(0, "setup", "passed"),
        report(0, "setup", "failed"),
        report(0, "setup", "skipped"),
        report(0, "setup", "passed", rerun=1),
        report(0, "call", "passed", line=line),
        report(0, "call", "failed", line=line),
        report(0, "teardown", "passed"),
        report(0, "teardown", "failed"),
        report(0, "teardown", "passed", line=line),
    ]
    picked = [(r.when, r.outcome) for r in reports if only_marks_reported(r)]
    assert picked == [("setup", "passed"), ("teardown", "passed")]
    for r in reports:
        if only_marks_reported(r):
            books = accounts()
            before = counted_state(books)
            assert books.count(r) is None
            assert counted_state(books) == before and books.reported == {r.nodeid}


def counted_state(books: Accounts) -> str:
    """What a report can change of the accounts but the set of reported tests."""

    def fields(value: Any) -> Any:
        slots = getattr(type(value), "__slots__", None)
        if slots is not None and not isinstance(value, (int, float, str)):
            return {name: getattr(value, name, None) for name in slots}
        return vars(value) if hasattr(value, "__dict__") else value

    tally = {name: fields(value) for name, value in vars(books.tally).items()}
    return repr(
        (tally, vars(books.passk), books.arms.arms, books.other_failures, books.failed_episodes)
    )
