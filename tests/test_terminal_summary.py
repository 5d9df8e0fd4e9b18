"""The terminal summary's sections (report/summary.py): each part in its place by kind."""

from __future__ import annotations

from typing import Any

from pytest_openenv.report.summary import render_sections, summary_sections, verdict_lines

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
