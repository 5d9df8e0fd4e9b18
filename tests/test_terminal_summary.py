"""The terminal summary's sections (report/summary.py): each part in its place by kind; the
gate's verdict as a function of the counts alone (report/judge.py)."""

from __future__ import annotations

from typing import Any

from pytest_openenv.report.arms import ArmAccounts
from pytest_openenv.report.gates import GateConfig
from pytest_openenv.report.judge import RunCounts, judge
from pytest_openenv.report.ledger import Ledger
from pytest_openenv.report.passk import PassKTally
from pytest_openenv.report.summary import render_sections, summary_sections, verdict_lines
from pytest_openenv.report.tally import RunClock, Tally

FIGURES: dict[str, Any] = {
    "envs": ["openspiel:tic_tac_toe"],
    "policies": ["scripted"],
    "models": [],
    "passed": 6,
    "failed": 4,
    "errored": 0,
    "skipped": 0,
    "ran": 10,
    "pass_rate": 0.6,
    "pass_rate_ci95": [0.31, 0.83],
    "mean_reward": 0.2,
    "mean_reward_stderr": 0.1,
    "mean_turns": 3.0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "wall_time_s": 1.0,
    "episodes_per_s": 10.0,
    "verdict_passed": 5,
    "verdict_pass_rate": 0.5,
    "test_passed_verdict_failed": 1,
    "train_rows": 6,
}
GROUPS = [
    {
        "test": "test_a.py::test_play",
        "env": "openspiel:tic_tac_toe",
        "policy": "scripted",
        "passed": 3,
        "ran": 5,
    },
    {
        "test": "test_b.py::test_play",
        "env": "openspiel:tic_tac_toe",
        "policy": "scripted",
        "passed": 3,
        "ran": 5,
    },
]


def test_the_env_verdicts_follow_the_pass_rate_at_its_indent_under_the_pooled_heading() -> None:
    verdicts = verdict_lines(FIGURES, "test")
    assert verdicts and verdicts[0].startswith("env verdict: 5 of 10 passed (50.0%)")
    sections = summary_sections(FIGURES, "out", groups=GROUPS, verdicts=verdicts)
    assert [s.title for s in sections[:4]] == ["groups", "pooled", "episodes", "pass rate"]
    lines = render_sections(sections)
    at = lines.index("  pass rate: 60.0%  (95% Wilson CI 31.0% - 83.0%, n=10)")
    assert lines[at + 1 : at + 1 + len(verdicts)] == ["  " + line for line in verdicts]
    assert lines[at + 1 + len(verdicts)] == "  mean reward: 0.200 ± 0.100 (s.e.)"
    # the run's own lines are not indented: they are not figures of the pool
    assert lines[-3:-1] == ["wall time: 1.0s    episodes/s: 10.0", "output: out"]


def test_one_group_has_no_pooled_heading_and_no_indent() -> None:
    lines = render_sections(
        summary_sections(FIGURES, "out", verdicts=verdict_lines(FIGURES, "test"))
    )
    assert lines[0] == "env: openspiel:tic_tac_toe    policy: scripted"
    assert lines[2].startswith("pass rate: 60.0%")
    assert lines[3].startswith("env verdict: 5 of 10 passed")
    assert not any(line.startswith("pooled") for line in lines)


def two_groups(passed_a: int, passed_b: int, ran: int = 5) -> RunCounts:
    """An earlier run's rows of two test functions (as ``--openenv-resume`` counts them)."""
    ledger = Ledger()
    for test, passed in (("test_a", passed_a), ("test_b", passed_b)):
        for seed in range(ran):
            row = {
                "test": f"test_x.py::{test}[{seed}]",
                "policy": "scripted",
                "env": "openspiel:tic_tac_toe",
                "seed": seed,
                "failure": {"outcome": "failed"},
            }
            ledger.add_row(row, failure_file=seed >= passed)
    tally = Tally.of_ledger(ledger, RunClock())
    arms = ArmAccounts.of_ledger(ledger.counted(), ["scripted"])
    return RunCounts(tally, arms, PassKTally(1), repeats=1)


def test_the_verdict_is_a_function_of_the_counts_each_group_judged_unless_pooled() -> None:
    counts = two_groups(passed_a=5, passed_b=1)  # 100% and 20%, pooled 60%
    each = judge(GateConfig(min_pass_rate=0.5), counts)
    assert not each.passed
    assert each.failed_groups == ["test_x.py::test_b · openspiel:tic_tac_toe · scripted"]
    pooled = judge(GateConfig(min_pass_rate=0.5, pooled=True), counts)
    assert pooled.passed


def test_a_subset_is_told_how_many_episodes_the_gate_judged() -> None:
    counts = two_groups(passed_a=5, passed_b=5)
    verdict = judge(GateConfig(min_pass_rate=0.5), counts, subset=lambda judged: f"judged {judged}")
    assert verdict.subset == "judged 10"
    assert verdict.checks_passed and not verdict.passed
