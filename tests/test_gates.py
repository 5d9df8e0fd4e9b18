"""Gates decide the exit code: thresholds, confidence bounds, errored episodes, other tests.

Exact pass rates come from a user policy (the ``openenv_policy`` fixture override) that
plays the scripted move (always a win against the ``first`` opponent), or stalls until the
turn limit (a failure), or raises ``PolicyUnavailable`` (an errored episode), chosen by seed.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

EXACT_POLICY = """
import pytest
from pytest_openenv.policies.base import Policy, PolicyUnavailable, Reply, ToolCall

# seed % PERIOD < PASS: win;  < PASS + ERRORS: errored;  otherwise: no move (fails)
PERIOD, PASS, ERRORS = {period}, {passing}, {errors}


class ExactPolicy(Policy):
    name = "exact"

    def act(self, turn):
        slot = turn.seed % PERIOD
        if slot < PASS:
            return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, f"c{{turn.turn}}"),))
        if slot < PASS + ERRORS:
            raise PolicyUnavailable("planted outage")
        return Reply(content="I would rather not move.")


@pytest.fixture
def openenv_policy():
    return ExactPolicy()
"""

EPISODE_TEST = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n={n}, opponent="first")
def test_episode(episode):
    assert episode.passed, episode.explain()
"""


def write_suite(
    pytester: pytest.Pytester,
    *,
    passing: int,
    errors: int = 0,
    period: int = 10,
    n: int = 10,
    extra_test: str = "",
) -> None:
    pytester.makeconftest(EXACT_POLICY.format(period=period, passing=passing, errors=errors))
    pytester.makepyfile(
        test_suite=EPISODE_TEST.format(n=n) + textwrap.dedent(extra_test),
    )


def summary(pytester: pytest.Pytester) -> dict:
    return json.loads((Path(pytester.path) / "openenv-results" / "summary.json").read_text())


COMMON = ("--openenv-max-turns=4",)


@pytest.mark.parametrize(
    ("threshold", "expected_exit", "verdict"),
    [("0.6", 0, "pass"), ("0.7", 0, "pass"), ("0.8", 1, "fail")],
    ids=["above", "at", "below"],
)
@pytest.mark.slow
def test_pass_rate_gate_above_at_below(pytester, run_pytest, threshold, expected_exit, verdict):
    write_suite(pytester, passing=7)  # exactly 7 of 10 pass
    result = run_pytest(*COMMON, f"--openenv-min-pass-rate={threshold}")
    assert result.ret == expected_exit, result.stdout.str()[-3000:]
    if verdict == "pass":  # pytest's last line counts the accepted episodes as gated
        result.assert_outcomes(passed=7, failed=0)
        assert result.parseoutcomes()["gated"] == 3
    else:
        result.assert_outcomes(passed=7, failed=3)
    gate = summary(pytester)["gate"]
    assert gate["verdict"] == verdict
    (check,) = gate["checks"]
    assert check["value"] == pytest.approx(0.7)
    assert check["threshold"] == float(threshold)
    assert check["rule"] == f"pass@1 >= {float(threshold):g} (point estimate)"
    assert summary(pytester)["exit_status"] == expected_exit
    out = result.stdout.str()
    assert f"gate: {'PASSED' if verdict == 'pass' else 'FAILED'}" in out
    assert "pass@1 = 70.0% (7/10)" in out


@pytest.mark.slow
def test_without_a_gate_failing_episodes_fail_the_run(pytester, run_pytest):
    write_suite(pytester, passing=9)
    result = run_pytest(*COMMON)
    assert result.ret == 1
    assert summary(pytester)["gate"] is None
    assert "gate:" not in result.stdout.str()


def wilson_lower(successes: int, n: int, confidence: float) -> float:
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n)


@pytest.mark.slow
def test_confidence_fails_a_small_sample_that_only_clears_the_point_estimate(pytester, run_pytest):
    write_suite(pytester, passing=9)  # 90% of 10: above 0.8, but the sample is small
    point = run_pytest(*COMMON, "--openenv-min-pass-rate=0.8")
    assert point.ret == 0, point.stdout.str()[-3000:]

    bounded = run_pytest(*COMMON, "--openenv-min-pass-rate=0.8", "--openenv-gate-confidence=0.95")
    assert bounded.ret == 1, bounded.stdout.str()[-3000:]
    (check,) = summary(pytester)["gate"]["checks"]
    assert check["value"] == pytest.approx(0.9)
    assert check["compared"] == pytest.approx(wilson_lower(9, 10, 0.95))
    assert check["compared"] < 0.8
    assert check["rule"] == "lower 95% Wilson bound of pass@1 >= 0.8"
    assert "lower 95% Wilson bound of pass@1 >= 0.8" in bounded.stdout.str()


@pytest.mark.slow
def test_errored_episodes_count_as_not_passed(pytester, run_pytest):
    write_suite(pytester, passing=7, errors=2)  # 7 pass, 2 error, 1 fails
    result = run_pytest(*COMMON, "--openenv-min-pass-rate=0.75")
    assert result.ret == 1
    result.assert_outcomes(passed=7, failed=1, errors=2)
    figures = summary(pytester)["figures"]
    assert (figures["passed"], figures["errored"], figures["ran"]) == (7, 2, 10)
    (check,) = summary(pytester)["gate"]["checks"]
    assert check["value"] == pytest.approx(0.7)
    # the same run passes a gate it meets: errors alone do not fail a gated session
    again = run_pytest(*COMMON, "--openenv-min-pass-rate=0.7")
    assert again.ret == 0, again.stdout.str()[-3000:]


@pytest.mark.slow
def test_a_failing_non_episode_test_still_fails_a_passing_gate(pytester, run_pytest):
    write_suite(
        pytester,
        passing=10,
        extra_test="""

        def test_plain_unit_test():
            assert 1 + 1 == 3
        """,
    )
    result = run_pytest(*COMMON, "--openenv-min-pass-rate=0.5")
    assert result.ret == 1
    result.assert_outcomes(passed=10, failed=1)
    gate = summary(pytester)["gate"]
    assert gate["verdict"] == "pass"
    assert gate["other_failures"] == 1
    assert "1 non-episode test(s) failed" in result.stdout.str()


@pytest.mark.slow
def test_gate_with_xdist_decides_the_exit_code(pytester, run_pytest):
    write_suite(pytester, passing=8)
    ok = run_pytest(*COMMON, "-n", "2", "--openenv-min-pass-rate=0.8")
    assert ok.ret == 0, ok.stdout.str()[-3000:]
    ok.assert_outcomes(passed=8, failed=0)
    assert ok.parseoutcomes()["gated"] == 2
    bad = run_pytest(*COMMON, "-n", "2", "--openenv-min-pass-rate=0.85")
    assert bad.ret == 1


@pytest.mark.slow
def test_mean_reward_gate_point_and_bound(pytester, run_pytest):
    write_suite(pytester, passing=8)  # 8 wins (reward 1), 2 unfinished (reward 0): mean 0.8
    assert run_pytest(*COMMON, "--openenv-min-mean-reward=0.8").ret == 0
    (check,) = summary(pytester)["gate"]["checks"]
    assert check["check"] == "mean reward"
    assert check["value"] == pytest.approx(0.8)
    assert run_pytest(*COMMON, "--openenv-min-mean-reward=0.81").ret == 1
    bounded = run_pytest(*COMMON, "--openenv-min-mean-reward=0.6", "--openenv-gate-confidence=0.95")
    (check,) = summary(pytester)["gate"]["checks"]
    stderr = math.sqrt(0.8 * 0.2 * 10 / 9 / 10)  # sample variance of eight 1s and two 0s
    assert check["compared"] == pytest.approx(0.8 - 1.959964 * stderr, rel=1e-5)
    # 0.8 clears 0.6 as a point estimate, but its lower bound (about 0.54) does not
    assert check["compared"] < 0.6
    assert bounded.ret == 1


@pytest.mark.slow
def test_gate_verdict_goes_to_github_step_summary(pytester, run_pytest, monkeypatch, tmp_path):
    target = tmp_path / "step_summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    write_suite(pytester, passing=7)
    result = run_pytest(*COMMON, "--openenv-min-pass-rate=0.8")
    assert result.ret == 1
    text = target.read_text()
    assert text.startswith("earlier step\n")  # appended, never truncated
    assert "| episodes | 7 passed, 3 failed, 0 errored, 0 skipped |" in text
    assert "**Gate: FAILED**" in text
    assert "| pass rate | pass@1 >= 0.8 (point estimate) | pass@1 = 70.0% (7/10) | 0.8 |" in text


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("--openenv-min-pass-rate=1.5", "between 0 and 1"),
        ("--openenv-min-pass-rate=abc", "a number"),
        ("--openenv-gate-confidence=1", "strictly between 0 and 1"),
        ("--openenv-gate-confidence=0", "strictly between 0 and 1"),
        ("--openenv-repeats=0", "a positive integer"),
        ("--openenv-gate-metric=pass@5", "pass@1, pass@k, pass^k"),
        ("--openenv-min-mean-reward=nan", "a finite number"),
    ],
)
def test_bad_gate_options_are_usage_errors(pytester, run_pytest, option, expected):
    write_suite(pytester, passing=10)
    result = run_pytest(option)
    assert result.ret == 4
    err = result.stderr.str()
    assert option.split("=")[0] in err and expected in err, err


@pytest.mark.slow
def test_junit_properties_per_episode(pytester, run_pytest):
    write_suite(pytester, passing=3, errors=1, period=5, n=5)
    for extra in ((), ("-n", "2")):
        xml_path = Path(pytester.path) / f"junit{len(extra)}.xml"
        result = run_pytest(*COMMON, *extra, f"--junitxml={xml_path}")
        assert result.ret == 1
        import xml.etree.ElementTree as ET

        cases = {
            case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in ET.parse(xml_path).getroot().iter("testcase")
        }
        assert sorted(cases) == [f"test_episode[ep-{i:06d}]" for i in range(5)]
        assert cases["test_episode[ep-000000]"] == {
            "openenv.reward": "1.0",
            "openenv.turns": "4",
            "openenv.outcome": "win",
        }
        assert cases["test_episode[ep-000003]"]["openenv.outcome"] == "error"
        assert cases["test_episode[ep-000004]"] == {
            "openenv.reward": "0.0",
            "openenv.turns": "4",
            "openenv.outcome": "unfinished",
        }
        # small properties only: never the record (messages) itself
        assert xml_path.stat().st_size < 8000


@pytest.mark.slow
def test_a_session_stopped_by_maxfail_is_not_passed_by_the_gate(pytester, run_pytest):
    # seed 0..2 win, 3 fails: -x stops there, at 3/4 = 75%, above the 0.5 threshold
    write_suite(pytester, passing=3, period=4, n=8)
    result = run_pytest(*COMMON, "-x", "--openenv-min-pass-rate=0.5")
    assert result.ret == 1
    gate = summary(pytester)["gate"]
    # one verdict: the checks pass on the episodes that ran, the gate does not
    assert gate["verdict"] == "fail" and gate["checks_passed"] and gate["stopped_early"]
    out = result.stdout.str()
    assert "the session stopped early (stopping after 1 failures)" in out
    assert "gate: FAILED" in out and "gate: PASSED" not in out


@pytest.mark.slow
def test_a_session_stopped_by_x_under_xdist_has_one_verdict(pytester, run_pytest):
    """``-x -n 2`` printed ``gate: PASSED`` and then that the run fails."""
    write_suite(pytester, passing=3, period=4, n=12)
    result = run_pytest(*COMMON, "-x", "-n", "2", "--openenv-min-pass-rate=0.5")
    # xdist ends a -x run as interrupted (exit 2): pytest's code, kept
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-3000:]
    out = result.stdout.str()
    assert "gate: PASSED" not in out, out[-3000:]
    assert "gate: FAILED" in out and "the session stopped early" in out
    assert summary(pytester)["gate"]["verdict"] == "fail"


@pytest.mark.parametrize("threshold", ["0", "0.5"])
@pytest.mark.slow
def test_a_run_with_no_episode_judged_is_never_a_pass(pytester, run_pytest, threshold):
    """Every episode errored (endpoint down): a threshold of 0 passed it."""
    write_suite(pytester, passing=0, errors=10)
    result = run_pytest(*COMMON, f"--openenv-min-pass-rate={threshold}")
    assert result.ret == 1, result.stdout.str()[-3000:]
    result.assert_outcomes(errors=10)
    gate = summary(pytester)["gate"]
    assert gate["verdict"] == "fail"
    judged = next(check for check in gate["checks"] if check["check"] == "episodes judged")
    assert not judged["passed"] and judged["errored"] == 10
    out = result.stdout.str()
    assert "gate: FAILED" in out and "no episode was judged: 10 errored" in out


def test_gate_best_of_without_a_resume_is_a_usage_error_naming_both_options(pytester, run_pytest):
    write_suite(pytester, passing=7)
    result = run_pytest(*COMMON, "--openenv-min-pass-rate=0.5", "--openenv-gate-best-of")
    assert result.ret == 4, result.stdout.str()
    err = result.stderr.str()
    assert "--openenv-gate-best-of judges figures that are best of N attempts" in err, err
    assert (
        "--openenv-resume-failed" in err and "add --openenv-resume --openenv-resume-failed" in err
    )
    assert not (Path(pytester.path) / "openenv-results").exists()  # refused before any episode


@pytest.mark.slow
def test_gate_best_of_with_a_plain_resume_judges_a_folder_already_best_of(pytester, run_pytest):
    write_suite(pytester, passing=7)
    run_pytest(*COMMON)  # 7 of 10
    write_suite(pytester, passing=10)
    run_pytest(*COMMON, "--openenv-resume", "--openenv-resume-failed")  # best of 2: 10 of 10
    gate = ("--openenv-min-pass-rate=0.9", "--openenv-resume")
    # a plain resume keeps the rows played again: the figures are still best of 2
    unjudged = run_pytest(*COMMON, *gate)
    assert summary(pytester)["figures"]["attempts"] == 2
    assert summary(pytester)["gate"] is None
    assert "the gate was not judged" in unjudged.stdout.str()
    judged = run_pytest(*COMMON, *gate, "--openenv-gate-best-of")
    assert judged.ret == 0, judged.stdout.str()
    (check,) = summary(pytester)["gate"]["checks"]
    assert check["check"] == "pass rate" and check["value"] == 1.0


VS_ACROSS_TESTS = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policies=["scripted", "random"])
def test_both(episode):
    pass

@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policies=["random"])
def test_random_only(episode):
    pass
"""


@pytest.mark.slow
def test_a_vs_reference_absent_from_one_test_is_said_to_be_absent_there_not_from_the_run(
    pytester, run_pytest
):
    pytester.makepyfile(test_suite=VS_ACROSS_TESTS)
    result = run_pytest(*COMMON, "--openenv-gate-vs=scripted")
    assert result.ret == 1, result.stdout.str()
    checks = {c["group"]: c for c in summary(pytester)["gate"]["checks"] if c["check"] == "vs"}
    alone = checks["test_suite.py::test_random_only · openspiel:tic_tac_toe · random"]
    assert not alone["passed"]
    assert alone["detail"].startswith(
        "scripted played no episode of test_suite.py::test_random_only on openspiel:tic_tac_toe,"
    ), alone["detail"]
    assert "in this run" not in result.stdout.str()
    # where it did play, the same reference is paired as usual
    both = checks["test_suite.py::test_both · openspiel:tic_tac_toe · random"]
    assert "paired episodes" in both["detail"]
