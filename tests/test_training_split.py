"""The training split holds what the env judged good: results.jsonl takes an episode only
when its test passed and its env verdict passed (``--openenv-train-on=verdict``, the
default); a test-passed episode the verdict failed goes to failures.jsonl as
``verdict-failed`` with both outcomes. ``--openenv-train-on=test`` keeps every test-passed
episode. The figures say which outcome they count, the card and metadata.json the rule."""

from __future__ import annotations

import json

import pytest
from helpers import read_jsonl
from llm_helpers import output

#: the README's first test file, its random-policy test: it checks the game ended, so
#: lost games pass the test while the env's verdict fails them
README_RANDOM_TEST = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=20, policy="random", seed=7)
def test_every_game_ends(episode):
    assert episode.done and episode.turns <= 5, episode.explain()
"""

NEGATIVE_TEST = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=12, policy="random", seed=3)
def test_random_loses(episode):
    assert not episode.passed
"""


def rows(pytester: pytest.Pytester, name: str) -> list[dict]:
    path = output(pytester) / name
    return read_jsonl(path) if path.exists() else []


def test_the_readme_test_file_writes_no_verdict_failed_row_to_the_training_split(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_ttt=README_RANDOM_TEST)
    result = run_pytest()
    assert result.ret == pytest.ExitCode.OK  # every test passed
    train = rows(pytester, "results.jsonl")
    kept_out = rows(pytester, "failures.jsonl")
    assert train and kept_out
    assert all(row["verify_metrics"]["verdict"] is True for row in train)
    assert len(train) + len(kept_out) == 20
    for row in kept_out:
        assert row["passed"] is True  # the test's outcome, as pytest reported it
        failure = row["failure"]
        assert failure["outcome"] == "verdict-failed"
        assert failure["test_outcome"] == "passed"
        assert failure["verdict"] is False
        assert "verdict" in failure["message"]
    figures = json.loads((output(pytester) / "summary.json").read_text())["figures"]
    assert figures["passed"] == 20
    assert figures["verdict_passed"] == len(train)
    assert figures["test_passed_verdict_failed"] == len(kept_out)
    assert figures["train_rows"] == len(train)
    stdout = result.stdout.str()
    assert f"env verdict: {len(train)} of 20 passed" in stdout
    assert f"{len(kept_out)} test-passed episode(s) the env's verdict failed" in stdout
    metadata = json.loads((output(pytester) / "metadata.json").read_text())
    assert metadata["settings"]["train_on"] == "verdict"
    card = (output(pytester) / "README.md").read_text()
    assert "whose test passed and whose env verdict passed" in card


@pytest.mark.slow
def test_train_on_test_keeps_every_test_passed_episode(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_ttt=README_RANDOM_TEST)
    result = run_pytest("--openenv-train-on=test")
    assert result.ret == pytest.ExitCode.OK
    train = rows(pytester, "results.jsonl")
    assert len(train) == 20
    assert any(row["verify_metrics"]["verdict"] is False for row in train)
    assert rows(pytester, "failures.jsonl") == []
    card = (output(pytester) / "README.md").read_text()
    assert "`--openenv-train-on=test`" in card
    assert json.loads((output(pytester) / "metadata.json").read_text())["settings"]["train_on"] == (
        "test"
    )


def test_a_negative_test_puts_no_wrong_answer_in_the_training_split(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_negative=NEGATIVE_TEST)
    result = run_pytest()
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert all(row["verify_metrics"]["verdict"] for row in rows(pytester, "results.jsonl"))
    assert rows(pytester, "results.jsonl") == []  # a verdict pass fails this test
    outcomes = {row["failure"]["outcome"] for row in rows(pytester, "failures.jsonl")}
    assert "verdict-failed" in outcomes


@pytest.mark.slow
def test_a_resume_under_the_other_rule_is_refused_and_keeps_the_rows(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_ttt=README_RANDOM_TEST)
    assert run_pytest().ret == pytest.ExitCode.OK
    before = {name: rows(pytester, name) for name in ("results.jsonl", "failures.jsonl")}
    result = run_pytest("--openenv-resume", "--openenv-train-on=test")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-train-on" in result.stderr.str()
    assert {name: rows(pytester, name) for name in before} == before


@pytest.mark.slow
def test_a_resume_keeps_the_verdict_failed_episodes_by_their_first_attempt(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_ttt=README_RANDOM_TEST)
    assert run_pytest().ret == pytest.ExitCode.OK
    kept_out = len(rows(pytester, "failures.jsonl"))
    assert kept_out > 0
    result = run_pytest("--openenv-resume")
    assert result.ret == pytest.ExitCode.OK  # their tests passed: nothing fails the run
    result.stdout.fnmatch_lines(["*20 skipped*"])  # every episode finished: none plays again
    assert len(rows(pytester, "failures.jsonl")) == kept_out
    figures = json.loads((output(pytester) / "summary.json").read_text())["figures"]
    assert figures["passed"] == 20 and figures["train_rows"] == 20 - kept_out
