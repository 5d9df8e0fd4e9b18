"""pass@1, unbiased pass@k and pass^k: the estimator, the tally and a run with repeats."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_openenv.report.passk import PassKTally, pass_at_k, pass_hat_k, problem_key


def direct_pass_at_k(n: int, c: int, k: int) -> float:
    """The estimator written out: 1 - P(all k drawn samples fail)."""
    return 1 - comb(n - c, k) / comb(n, k)


def test_pass_at_k_matches_the_unbiased_estimator_on_a_constructed_case():
    # three problems, five samples each, with 0, 2 and 5 passes
    tally = PassKTally(k=3)
    for seed, passes in enumerate((0, 2, 5)):
        for r in range(5):
            tally.add(f"t.py::test_x[ep-{seed:06d}-r{r}]", r < passes)
    result = tally.result()
    expected = (
        direct_pass_at_k(5, 0, 3) + direct_pass_at_k(5, 2, 3) + direct_pass_at_k(5, 5, 3)
    ) / 3
    assert result.pass_at_k == pytest.approx(expected)
    assert result.pass_at_k == pytest.approx((0 + (1 - 1 / 10) + 1) / 3)  # C(3,3)/C(5,3)=1/10
    assert result.pass_at_1 == pytest.approx((0 + 0.4 + 1) / 3)
    assert result.pass_hat_k == pytest.approx((0 + 0 + 1) / 3)  # C(2,3) = 0
    assert (result.problems, result.problems_scored) == (3, 3)


@given(st.integers(1, 30).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_estimators_agree_with_direct_computation(nc):
    n, c = nc
    for k in range(1, n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(direct_pass_at_k(n, c, k))
        assert pass_hat_k(n, c, k) == pytest.approx(comb(c, k) / comb(n, k))
        # at least one of k passes is never less likely than all k passing
        assert pass_hat_k(n, c, k) <= c / n + 1e-12 <= pass_at_k(n, c, k) + 2e-12
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_estimators_reject_impossible_counts():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_hat_k(3, 4, 1)


def test_problem_key_strips_only_the_repeat_suffix():
    assert problem_key("a.py::t[ep-000004-r2]") == "a.py::t[ep-000004]"
    assert problem_key("a.py::t[ep-000004]") == "a.py::t[ep-000004]"
    assert problem_key("a.py::t[x-ep-000004-r12-y]") == "a.py::t[x-ep-000004-y]"
    assert problem_key("a.py::u[ep-000004-r0]") != problem_key("a.py::t[ep-000004-r0]")


def test_seeds_short_of_k_runs_are_left_out_of_pass_at_k():
    tally = PassKTally(k=2)
    tally.add("t[ep-000000-r0]", True)
    tally.add("t[ep-000000-r1]", False)
    tally.add("t[ep-000001-r0]", False)  # r1 never ran (interrupted)
    result = tally.result()
    assert (result.problems, result.problems_scored) == (2, 1)
    assert result.pass_at_k == 1.0
    assert result.pass_hat_k == 0.0
    assert result.pass_at_1 == pytest.approx(0.25)


REPEAT_POLICY = """
import pytest
from pytest_openenv.policies.base import Policy, Reply, ToolCall

# how many of the repeats of each seed win (the others stall until the turn limit)
WINS = {wins}


class RepeatAware(Policy):
    name = "repeat-aware"

    def act(self, turn):
        if turn.repeat < WINS[turn.seed]:
            return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, "c"),))
        return Reply(content="pass")


@pytest.fixture
def openenv_policy():
    return RepeatAware()
"""

SUITE = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=4, opponent="first")
def test_episode(episode):
    assert episode.passed, episode.explain()
"""


@pytest.mark.slow
def test_repeats_report_pass_at_k_and_gate_on_it(pytester, run_pytest):
    wins = {0: 0, 1: 1, 2: 3, 3: 2}  # c per seed with K = 3
    pytester.makeconftest(REPEAT_POLICY.format(wins=wins))
    pytester.makepyfile(test_suite=SUITE)
    args = ("--openenv-repeats=3", "--openenv-max-turns=4")
    result = run_pytest(*args, "-v")
    assert result.ret == 1  # no gate: failing repeats fail the run
    out = result.stdout.str()
    assert "test_episode[ep-000002-r2]" in out and "test_episode[ep-000000-r0]" in out
    summary = json.loads((Path(pytester.path) / "openenv-results" / "summary.json").read_text())
    passk = summary["passk"]
    assert passk["k"] == 3 and passk["problems"] == 4
    n = 3
    assert passk["pass@k"] == pytest.approx(
        sum(direct_pass_at_k(n, c, 3) for c in wins.values()) / 4
    )
    assert passk["pass^k"] == pytest.approx(sum(c == n for c in wins.values()) / 4)
    assert passk["pass@1"] == pytest.approx(sum(wins.values()) / 12)
    assert "pass@1 50.0%    pass@3 75.0%    pass^3 25.0%" in out

    # the gate reads the metric it is told to
    assert (
        run_pytest(*args, "--openenv-gate-metric=pass@k", "--openenv-min-pass-rate=0.75").ret == 0
    )
    assert run_pytest(*args, "--openenv-gate-metric=pass@k", "--openenv-min-pass-rate=0.8").ret == 1
    assert (
        run_pytest(*args, "--openenv-gate-metric=pass^k", "--openenv-min-pass-rate=0.25").ret == 0
    )
    result = run_pytest(*args, "--openenv-gate-metric=pass^k", "--openenv-min-pass-rate=0.3")
    assert result.ret == 1
    assert "pass^3 >= 0.3 (point estimate)" in result.stdout.str()


@pytest.mark.slow
def test_repeats_sample_distinct_streams(pytester, run_pytest):
    """Each repeat of a seed is a fresh sample: the random policy plays differently."""
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-policy=random",
        "--openenv-n=3",
        "--openenv-repeats=4",
        "-n",
        "2",
    )
    assert result.ret in (0, 1)
    folder = Path(pytester.path) / "openenv-results"
    rows = [
        json.loads(line)
        for name in ("results.jsonl", "failures.jsonl")
        for line in (folder / name).read_text().splitlines()
    ]
    assert len(rows) == 12
    by_seed: dict[int, set[str]] = {}
    for row in rows:
        moves = json.dumps([m.get("tool_calls") for m in row["messages"]])
        by_seed.setdefault(row["seed"], set()).add(moves)
        assert row["episode_id"].startswith(f"ep-{row['seed']:06d}-r")
    assert sorted(by_seed) == [0, 1, 2]
    # four repeats of one seed drawing the same game every time would mean one stream
    assert all(len(games) > 1 for games in by_seed.values()), by_seed
