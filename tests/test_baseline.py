"""Baseline comparison: fail only when the pass rate drops significantly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_openenv.config.settings import GateSettings, Settings
from pytest_openenv.report.baseline import Rate, compare


def one_sided_p(x1: int, n1: int, x2: int, n2: int) -> float:
    """P(Z <= z) for the pooled two-proportion z statistic, via erf."""
    p = (x1 + x2) / (n1 + n2)
    z = (x2 / n2 - x1 / n1) / math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2))
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_a_significant_drop_is_flagged_and_noise_is_not():
    drop = compare(Rate(90, 100), Rate(70, 100), metric="pass@1", confidence=0.95)
    assert drop.p_value == pytest.approx(one_sided_p(90, 100, 70, 100))
    assert drop.significant_drop
    noise = compare(Rate(90, 100), Rate(86, 100), metric="pass@1", confidence=0.95)
    assert noise.p_value == pytest.approx(one_sided_p(90, 100, 86, 100))
    assert not noise.significant_drop
    assert noise.change == pytest.approx(-0.04)
    # a stricter level lets a borderline drop through
    border = compare(Rate(90, 100), Rate(80, 100), metric="pass@1", confidence=0.95)
    assert border.significant_drop
    assert not compare(
        Rate(90, 100), Rate(80, 100), metric="pass@1", confidence=0.99
    ).significant_drop


def test_improvement_and_identical_runs_never_fail():
    assert not compare(Rate(5, 10), Rate(10, 10), metric="pass@1", confidence=0.95).significant_drop
    same = compare(Rate(10, 10), Rate(10, 10), metric="pass@1", confidence=0.95)
    assert same.p_value == 1.0 and not same.significant_drop


POLICY = """
import pytest
from pytest_openenv.policies.base import Policy, Reply, ToolCall

PASS = {passing}  # seeds with seed % 20 < PASS win; the rest stall


class Knob(Policy):
    name = "knob"

    def act(self, turn):
        if turn.seed % 20 < PASS:
            return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, "c"),))
        return Reply(content="...")


@pytest.fixture
def openenv_policy():
    return Knob()
"""

SUITE = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=40, opponent="first")
def test_episode(episode):
    assert episode.passed, episode.explain()
"""


def run_with(pytester, run_pytest, passing: int, *args: str):
    pytester.makeconftest(POLICY.format(passing=passing))
    pytester.makepyfile(test_suite=SUITE)
    return run_pytest("--openenv-max-turns=4", *args)


def gate(pytester) -> dict:
    path = Path(pytester.path) / "openenv-results" / "summary.json"
    return json.loads(path.read_text())["gate"]


@pytest.mark.slow
def test_baseline_run_fails_on_a_significant_drop_and_passes_within_noise(pytester, run_pytest):
    first = run_with(pytester, run_pytest, 19)  # 38/40
    assert first.ret == 1  # no gate: two failing episodes fail the run
    saved = Path(pytester.path) / "baseline.json"
    saved.write_text((Path(pytester.path) / "openenv-results" / "summary.json").read_text())

    noisy = run_with(pytester, run_pytest, 18, "--openenv-baseline=baseline.json")  # 36/40
    assert noisy.ret == 0, noisy.stdout.str()[-3000:]
    (check,) = gate(pytester)["checks"]
    assert check["passed"]
    assert check["comparison"]["p_value"] == pytest.approx(one_sided_p(38, 40, 36, 40))
    assert "change -5.0 points" in noisy.stdout.str()

    dropped = run_with(pytester, run_pytest, 12, "--openenv-baseline=baseline.json")  # 24/40
    assert dropped.ret == 1
    (check,) = gate(pytester)["checks"]
    assert not check["passed"] and check["comparison"]["significant_drop"]
    assert check["comparison"]["p_value"] == pytest.approx(one_sided_p(38, 40, 24, 40))
    out = dropped.stdout.str()
    assert "(significant drop)" in out and "one-sided two-proportion z-test, 95%" in out


@pytest.mark.slow
def test_baseline_may_be_the_output_folder_about_to_be_overwritten(pytester, run_pytest):
    run_with(pytester, run_pytest, 20)  # 40/40 into openenv-results/
    dropped = run_with(pytester, run_pytest, 14, "--openenv-baseline=openenv-results")
    assert dropped.ret == 1
    (check,) = gate(pytester)["checks"]
    assert check["comparison"]["baseline"] == 1.0 and check["comparison"]["current"] == 0.7
    # the summary now holds this run: the next comparison is against 28/40
    again = run_with(pytester, run_pytest, 14, "--openenv-baseline=openenv-results")
    assert again.ret == 0


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "does not exist"),
        ("{not json", "is not valid JSON"),
        ('{"figures": {"passed": 3}}', "no valid figures.passed / figures.ran"),
        ('{"figures": {"passed": 0, "ran": 0}}', "no episode that ran"),
    ],
)
def test_unusable_baseline_is_a_usage_error(pytester, run_pytest, content, expected):
    if content is not None:
        (Path(pytester.path) / "old.json").write_text(content)
    result = run_with(pytester, run_pytest, 20, "--openenv-baseline=old.json")
    assert result.ret == 4
    err = result.stderr.str()
    assert "--openenv-baseline='old.json'" in err and expected in err, err
    assert not (Path(pytester.path) / "openenv-results").exists()  # nothing ran or was written


def test_baseline_rates_per_metric_and_a_missing_metric_is_a_usage_error(tmp_path):
    from pytest_openenv.report.baseline import load_baseline
    from pytest_openenv.report.gates import GateConfig

    old = tmp_path / "summary.json"
    old.write_text(
        json.dumps(
            {
                "figures": {"passed": 30, "ran": 40},
                "passk": {"k": 4, "problems": 10, "problems_scored": 10, "pass@k": 0.9},
            }
        )
    )
    baseline = load_baseline(str(tmp_path), relative_to=Path("/"))
    assert baseline.rate("pass@1") == Rate(30.0, 40)
    assert baseline.rate("pass@k") == Rate(9.0, 10)
    assert baseline.rate("pass^k") is None

    settings = Settings(gate=GateSettings(baseline=str(old), metric="pass^k"))
    with pytest.raises(pytest.UsageError, match=r"has no pass\^k figure .* it has pass@1, pass@k"):
        GateConfig.from_settings(settings, invocation_dir=tmp_path)


def write_baseline(pytester, **figures) -> None:
    summary = {
        "figures": {
            "passed": 38,
            "ran": 40,
            "envs": ["openspiel:connect_four"],
            "policies": ["knob"],
            "models": [],
            **figures,
        }
    }
    (Path(pytester.path) / "other.json").write_text(json.dumps(summary))


@pytest.mark.slow
def test_a_baseline_of_another_env_is_refused_unless_asked(pytester, run_pytest):
    """Another env's pass rate was compared without a word."""
    write_baseline(pytester)
    # the command line names the env: refused before any episode
    refused = run_with(
        pytester,
        run_pytest,
        20,
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-baseline=other.json",
    )
    assert refused.ret == 4, refused.stdout.str()[-3000:]
    refused.stderr.fnmatch_lines(
        [
            "*other.json is a run of env openspiel:connect_four, this run plays "
            "openspiel:tic_tac_toe*--openenv-baseline-any-env to compare them anyway*"
        ]
    )
    assert not (Path(pytester.path) / "openenv-results").exists()

    # only the marker names it: known at the end, the baseline check fails and says why
    marked = run_with(pytester, run_pytest, 20, "--openenv-baseline=other.json")
    assert marked.ret == 1, marked.stdout.str()[-3000:]
    (check,) = gate(pytester)["checks"]
    assert not check["passed"]
    assert "the baseline is a run of env openspiel:connect_four, this run played" in check["detail"]

    asked = run_with(
        pytester, run_pytest, 20, "--openenv-baseline=other.json", "--openenv-baseline-any-env"
    )
    assert asked.ret == 0, asked.stdout.str()[-3000:]
    (check,) = gate(pytester)["checks"]
    assert check["passed"]
    assert check["detail"].startswith(
        "compared across env openspiel:connect_four -> openspiel:tic_tac_toe: pass@1 95.0%"
    )


@pytest.mark.slow
def test_a_baseline_of_another_policy_or_model_says_what_differs(pytester, run_pytest):
    write_baseline(pytester, envs=["openspiel:tic_tac_toe"], policies=["openai"], models=["m-1"])
    result = run_with(pytester, run_pytest, 20, "--openenv-baseline=other.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    (check,) = gate(pytester)["checks"]
    assert check["passed"]
    assert check["detail"].startswith("compared across policy openai -> knob; model m-1 -> none:")
    assert "compared across policy openai -> knob; model m-1 -> none" in result.stdout.str()


def check_of(pytester, folder: str) -> dict:
    path = Path(pytester.path) / folder / "summary.json"
    (check,) = json.loads(path.read_text())["gate"]["checks"]
    return check


def best_of_two_folder(pytester, run_pytest) -> None:
    """openenv-results/: 24 of 40 on the first attempt, 40 of 40 best of 2 (every failed
    episode played again by --openenv-resume-failed, and passed)."""
    run_with(pytester, run_pytest, 12)
    run_with(pytester, run_pytest, 20, "--openenv-resume", "--openenv-resume-failed")
    figures = json.loads((Path(pytester.path) / "openenv-results" / "summary.json").read_text())
    assert (figures["figures"]["passed"], figures["figures"]["attempts"]) == (40, 2)


@pytest.mark.slow
def test_a_best_of_baseline_is_compared_by_its_first_attempts_paired_first_with_first(
    pytester, run_pytest
):
    best_of_two_folder(pytester, run_pytest)
    # the same policy again, one attempt per episode: 24 of 40, as its first attempts were
    same = run_with(
        pytester, run_pytest, 12, "--openenv-output=same", "--openenv-baseline=openenv-results"
    )
    assert same.ret == 0, same.stdout.str()[-3000:]
    check = check_of(pytester, "same")
    assert check["passed"] and check["paired"] and check["baseline_counted"] == "first attempts"
    assert check["attempts"] == {"current": 1, "baseline": 2}
    comparison = check["comparison"]
    assert (comparison["baseline"], comparison["current"]) == (0.6, 0.6)
    assert (comparison["newly_failing"], comparison["newly_passing"]) == (0, 0)
    assert "counting the baseline's first attempts (its figures are best of up to 2)" in (
        same.stdout.str()
    )
    # one seed in 20 worse: exactly the two seeds that passed first time and fail now are
    # newly failing (paired with the best-of attempts, every failing seed would be)
    worse = run_with(
        pytester, run_pytest, 11, "--openenv-output=worse", "--openenv-baseline=openenv-results"
    )
    assert worse.ret == 0, worse.stdout.str()[-3000:]
    comparison = check_of(pytester, "worse")["comparison"]
    assert (comparison["newly_failing"], comparison["newly_passing"]) == (2, 0)
    assert comparison["p_value"] == pytest.approx(0.25)  # P(X >= 2), X ~ Binomial(2, 1/2)


@pytest.mark.slow
def test_a_best_of_summary_without_its_rows_is_refused_before_any_episode(pytester, run_pytest):
    best_of_two_folder(pytester, run_pytest)
    saved = Path(pytester.path) / "best.json"
    saved.write_text((Path(pytester.path) / "openenv-results" / "summary.json").read_text())
    result = run_with(
        pytester, run_pytest, 12, "--openenv-output=now", "--openenv-baseline=best.json"
    )
    assert result.ret == 4
    err = result.stderr.str()
    assert "--openenv-baseline='best.json'" in err and "best of up to 2 attempts" in err, err
    assert "no rows beside it say which attempt passed" in err
    assert not (Path(pytester.path) / "now").exists()


def write_best_of_folder(folder: Path) -> None:
    """An earlier folder by hand: seeds 0-3, seed 1 passed on its second attempt, seed 3
    failed twice; 3 of 4 best of 2, 2 of 4 first attempts."""

    def row(seed: int, passed: bool, attempt: int = 1) -> str:
        extra = {"repeat": 0, **({"attempt": attempt} if attempt > 1 else {})}
        return json.dumps(
            {
                "episode_id": f"ep-{seed:06d}",
                "test": f"t.py::test_x[ep-{seed:06d}]",
                "seed": seed,
                "env": "openspiel:tic_tac_toe",
                "policy": "expert",
                "passed": passed,
                "reward": 1.0 if passed else -1.0,
                "extra": extra,
            }
        )

    folder.mkdir()
    figures = {"passed": 3, "ran": 4, "attempts": 2, "envs": ["openspiel:tic_tac_toe"]}
    (folder / "summary.json").write_text(json.dumps({"figures": figures}))
    results = [row(0, True), row(1, True, 2), row(2, True)]
    (folder / "results.jsonl").write_text("\n".join(results) + "\n")
    (folder / "failures.jsonl").write_text(row(3, False, 2) + "\n")


def test_a_best_of_baseline_reads_its_first_attempts_and_refuses_to_compare_unlike_runs(
    tmp_path,
):
    from pytest_openenv.report.baseline import load_baseline
    from pytest_openenv.report.gates import GateConfig, RunFigures, evaluate
    from pytest_openenv.report.passk import PassKTally
    from pytest_openenv.report.stats import RunningMean

    write_best_of_folder(tmp_path / "best")
    best = load_baseline("best", relative_to=tmp_path)
    assert best.attempts == 2 and best.rate("pass@1") == Rate(3.0, 4)
    first, how = best.counted_like(1)
    assert first is not None and first.rate("pass@1") == Rate(2.0, 4)
    assert first.outcomes["expert"][("t.py::test_x", 1, 0)] == (False, None)
    assert how.startswith("counting the baseline's first attempts")
    assert best.counted_like(2)[0] is best  # best of 2 against a best-of run: as recorded

    def figures(attempts: int) -> RunFigures:
        return RunFigures(
            passed=4,
            ran=4,
            reward=RunningMean(),
            passk=PassKTally(1).result(),
            judged=4,
            envs=frozenset({"openspiel:tic_tac_toe"}),
            attempts=attempts,
        )

    # a best-of run (--openenv-gate-best-of) against a baseline of single attempts: refused
    (tmp_path / "once").mkdir()
    (tmp_path / "once" / "summary.json").write_text(
        json.dumps({"figures": {"passed": 3, "ran": 4}})
    )
    once = GateConfig(baseline=load_baseline("once", relative_to=tmp_path))
    (check,) = evaluate(once, figures(2)).checks
    assert not check.passed
    assert "best of up to 2 attempts" in check.detail and "not comparable" in check.detail
    # best of 2 against best of 2: compared as recorded, and said so
    (check,) = evaluate(GateConfig(baseline=best), figures(2)).checks
    assert check.passed and check.extra["baseline_counted"] == "best of N"
    assert check.detail.startswith("best of up to 2 attempts in the baseline")
