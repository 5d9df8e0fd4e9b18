"""OpenEnv's eval API runs a pytest-openenv suite: ``EvalHarness.run_from_config`` on our
harness gives an ``EvalResult`` whose scores are the run's summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openenv.core.evals import EvalConfig, EvalHarness, EvalResult

from pytest_openenv.errors import HarnessParameterError, HarnessRunFailed
from pytest_openenv.openenv_harness import PytestOpenEnvHarness, option_args

SUITE = """
import pytest

@pytest.mark.openenv(n=3)
def test_no_loss(episode):
    assert episode.passed, episode.explain()
"""


def config(harness: EvalHarness, dataset: str, **parameters: object) -> EvalConfig:
    return EvalConfig(
        harness_name=harness.name,
        harness_version=PytestOpenEnvHarness.version,
        library_versions={"openenv": "any"},
        dataset=dataset,
        eval_parameters=parameters,
    )


def flattened(summary: dict[str, object]) -> dict[str, object]:
    figures = summary["figures"]
    assert isinstance(figures, dict)
    return {**figures, **{k: v for k, v in summary.items() if k != "figures"}}


def test_run_from_config_gives_an_eval_result_whose_scores_are_summary_json(
    tmp_path: Path,
) -> None:
    harness = PytestOpenEnvHarness(output=tmp_path / "out", pytest_args=["-n", "0"], cwd=tmp_path)
    assert isinstance(harness, EvalHarness)
    asked = config(harness, "openspiel:tic_tac_toe", n=4, policy="random", repeats=2, seed=3)
    result = harness.run_from_config(asked)
    assert isinstance(result, EvalResult)
    assert result.config == asked
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert result.scores == flattened(summary)
    assert result.scores["episodes"] == 8
    assert result.scores["passk"]["k"] == 2
    assert result.scores["policies"] == ["random"]
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["settings"]["seed"] == 3


@pytest.mark.slow
def test_a_suite_path_runs_its_tests_with_the_env_as_their_default(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    harness = PytestOpenEnvHarness(output=tmp_path / "out", pytest_args=["-n", "0"], cwd=tmp_path)
    result = harness.run_from_config(
        config(harness, "test_suite.py", env="openspiel:tic_tac_toe", min_pass_rate=1.0)
    )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert result.scores == flattened(summary)
    assert result.scores["passed"] == 3
    assert result.scores["gate"]["passed"] is True
    assert result.scores["exit_status"] == 0


def test_an_unknown_parameter_names_the_keys_there_are() -> None:
    with pytest.raises(HarnessParameterError, match="min_pass_rate"):
        option_args({"pass_rate_floor": 0.9})
    with pytest.raises(HarnessParameterError, match="set by the harness"):
        option_args({"output": "elsewhere"})
    assert option_args({"n": 5, "resume": True, "private": False, "env_config": {"a": 1}}) == [
        "--openenv-n=5",
        "--openenv-resume",
        '--openenv-env-config={"a": 1}',
    ]


def test_a_run_that_ends_without_figures_raises_with_its_output(tmp_path: Path) -> None:
    harness = PytestOpenEnvHarness(output=tmp_path / "out", pytest_args=["-n", "0"], cwd=tmp_path)
    with pytest.raises(HarnessRunFailed, match=r"exit code 4 \(usage error\)[\s\S]*--openenv-n"):
        harness.run_from_config(config(harness, "openspiel:tic_tac_toe", n=0))


def test_a_reused_output_never_gives_an_earlier_runs_summary(tmp_path: Path) -> None:
    """A run that writes no summary.json (no episode test) returned the one an earlier run
    left in the same ``output``, with that run's ``exit_status: 0`` for a child that exited 1."""
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert False\n")
    harness = PytestOpenEnvHarness(output=tmp_path / "out", pytest_args=["-n", "0"], cwd=tmp_path)
    first = harness.run_from_config(config(harness, "openspiel:tic_tac_toe", n=2, policy="random"))
    assert first.scores["episodes"] == 2 and first.scores["exit_status"] in (0, 1)
    earlier = (tmp_path / "out" / "summary.json").read_bytes()
    with pytest.raises(HarnessRunFailed, match=r"exit code 1 .*wrote no summary\.json"):
        harness.run_from_config(config(harness, "test_plain.py"))
    assert (tmp_path / "out" / "summary.json").read_bytes() == earlier  # left as it was
