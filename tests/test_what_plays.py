"""What plays is what was asked: a model or sampling option no policy of the run uses is
a usage error before any episode, naming what would make it play; never a silent fallback
to the built-in teacher. metadata.json records sampling only for a policy that samples."""

from __future__ import annotations

import json

import pytest
from llm_helpers import (  # noqa: F401 - fixtures
    ENV,
    MODEL,
    clean_sdk_env_fixture,
    openai_server_fixture,
    output,
)

README_FILE = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=4)
def test_teacher_never_loses(episode):
    assert episode.reward >= 0, episode.explain()


@pytest.mark.openenv("openspiel:tic_tac_toe", n=4, policy="random", seed=7)
def test_every_game_ends(episode):
    assert episode.done and episode.turns <= 5, episode.explain()
"""


def refused_before_any_episode(result: pytest.RunResult, pytester: pytest.Pytester) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not (output(pytester) / "results.jsonl").exists()
    assert not (output(pytester) / "failures.jsonl").exists()
    return result.stderr.str()


@pytest.mark.parametrize(
    ("env", "model", "teacher"),
    [
        (ENV, "gpt-4o-mini", "expert"),
        ("--openenv-env=reasoning_gym:chain_sum", "claude-sonnet-4-5", "scripted"),
    ],
)
@pytest.mark.slow
def test_a_model_without_a_policy_that_plays_it_is_refused(
    run_pytest, pytester: pytest.Pytester, env: str, model: str, teacher: str
) -> None:
    result = run_pytest(env, "--openenv-n=4", f"--openenv-model={model}")
    stderr = refused_before_any_episode(result, pytester)
    assert f"--openenv-model={model} is set but the policy is '{teacher}'" in stderr
    assert "plays no model" in stderr
    key = "ANTHROPIC_API_KEY" if model.startswith("claude") else "OPENAI_API_KEY"
    assert key in stderr
    assert "--openenv-policy=" in stderr


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_command_line_model_no_test_of_the_file_plays_is_refused(
    run_pytest, pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makepyfile(test_ttt=README_FILE)
    result = run_pytest("--openenv-model=gpt-4o-mini", *workers)
    stderr = refused_before_any_episode(result, pytester)
    assert "--openenv-model=gpt-4o-mini is set but the policy is" in stderr
    assert "INTERNALERROR" not in result.stdout.str() + stderr


def test_a_marker_model_with_a_policy_that_plays_none_is_refused(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        test_models="""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policy="random", models=["gpt-4o"])
        def test_games(episode):
            assert episode.done
        """
    )
    result = run_pytest()
    stderr = refused_before_any_episode(result, pytester)
    assert "test_games: openenv marker models=['gpt-4o'] is set but the policy is 'random'" in (
        stderr
    )


@pytest.mark.parametrize(
    "sampling", ["--openenv-temperature=0.9", "--openenv-max-tokens=64"], ids=["temp", "tokens"]
)
def test_sampling_options_with_a_scripted_policy_are_refused(
    run_pytest, pytester: pytest.Pytester, sampling: str
) -> None:
    result = run_pytest(ENV, "--openenv-n=3", "--openenv-policy=scripted", sampling)
    stderr = refused_before_any_episode(result, pytester)
    assert f"{sampling} is set but the policy is 'scripted'" in stderr
    assert "does not sample" in stderr


def test_a_sampling_ini_key_with_a_scripted_policy_is_refused(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makeini("[pytest]\nopenenv_temperature = 0.7\n")
    result = run_pytest(ENV, "--openenv-n=3", "--openenv-policy=scripted")
    stderr = refused_before_any_episode(result, pytester)
    assert "ini key openenv_temperature" in stderr
    assert "does not sample" in stderr


def test_a_callable_policy_is_handed_no_model(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        agents="""
        def first(messages, tools):
            return None
        """
    )
    result = run_pytest(ENV, "--openenv-n=2", "--openenv-policy=agents:first", "--openenv-model=m")
    stderr = refused_before_any_episode(result, pytester)
    assert "'agents:first'" in stderr and "plays no model" in stderr


def test_metadata_records_no_sampling_for_a_policy_that_does_not_sample(
    run_pytest, pytester: pytest.Pytester
) -> None:
    result = run_pytest(ENV, "--openenv-n=2")
    assert result.ret == pytest.ExitCode.OK
    metadata = json.loads((output(pytester) / "metadata.json").read_text())
    assert "temperature" not in metadata["settings"]["llm"]
    assert "max_tokens" not in metadata["settings"]["llm"]
    assert "temperature" not in metadata["identity"]


@pytest.mark.slow
def test_metadata_records_sampling_for_a_model_that_played(
    run_pytest, pytester: pytest.Pytester, openai_server
) -> None:
    result = run_pytest(
        ENV,
        "--openenv-n=2",
        f"--openenv-llm-endpoint={openai_server.base_url}",
        f"--openenv-model={MODEL}",
        "--openenv-temperature=0.4",
    )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    llm = json.loads((output(pytester) / "metadata.json").read_text())["settings"]["llm"]
    assert llm["temperature"] == 0.4 and llm["model"] == MODEL


def test_an_endpoint_no_policy_calls_is_refused(run_pytest, pytester: pytest.Pytester) -> None:
    result = run_pytest(
        ENV,
        "--openenv-n=2",
        "--openenv-policy=random",
        "--openenv-llm-endpoint=http://127.0.0.1:9/v1",
    )
    stderr = refused_before_any_episode(result, pytester)
    assert "--openenv-llm-endpoint=http://127.0.0.1:9/v1 is set but the policy is 'random'" in (
        stderr
    )
