"""Model endpoints are checked once before any episode, as env servers are: a dead
endpoint, a refused key or a model the endpoint does not serve is one usage error (exit 4)
naming endpoint, model and what answered; ``--openenv-replay`` needs no endpoint."""

from __future__ import annotations

import pytest
from llm_helpers import ENV, MODEL, clean_sdk_env_fixture, dist, output  # noqa: F401 - fixture
from servers.anthropic_messages import serve_anthropic
from servers.openai_compat import serve_openai

DEAD = "http://127.0.0.1:9/v1"
KEY = "sk-endpoint-check-secret-0123456789"


def refused(result: pytest.RunResult, pytester: pytest.Pytester) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert not (output(pytester) / "results.jsonl").exists()
    assert not (output(pytester) / "failures.jsonl").exists()
    text = result.stderr.str()
    assert "checked before any episode ran" in text
    return text


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dead_endpoint_is_one_usage_error_before_any_episode(
    run_pytest, pytester: pytest.Pytester, workers: int
) -> None:
    result = run_pytest(
        ENV, "--openenv-n=50", f"--openenv-llm-endpoint={DEAD}", "--openenv-model=m", *dist(workers)
    )
    text = refused(result, pytester)
    assert f"{DEAD} (--openenv-policy=openai, --openenv-model=m): unreachable" in text
    assert text.count("unreachable") == 1
    assert "errored" not in result.stdout.str()


def test_a_model_the_endpoint_does_not_serve_is_refused(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_openai(models=("served-a", "served-b")) as server:
        result = run_pytest(
            ENV, "--openenv-n=5", f"--openenv-llm-endpoint={server.base_url}", "--openenv-model=x"
        )
        completions = server.requests
    text = refused(result, pytester)
    assert "--openenv-model=x): does not serve the model" in text
    assert "served-a, served-b" in text
    assert completions == 0


def test_a_refused_key_is_one_usage_error_that_shows_no_key(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with serve_openai(models_status=401, echo_auth=True) as server:
        result = run_pytest(
            ENV,
            "--openenv-n=5",
            f"--openenv-llm-endpoint={server.base_url}",
            f"--openenv-model={MODEL}",
        )
        sent = server.model_check_headers
    text = refused(result, pytester)
    assert "refused the key (HTTP 401" in text and "OPENAI_API_KEY" in text
    assert any(headers.get("Authorization") == f"Bearer {KEY}" for headers in sent)
    assert KEY not in text + result.stdout.str()


@pytest.mark.parametrize(
    ("faults", "said"),
    [
        ({"models": ("claude-real",)}, "does not serve the model (HTTP 404"),
        ({"models_status": 403}, "refused the key (HTTP 403"),
    ],
    ids=["unknown-model", "forbidden"],
)
@pytest.mark.slow
def test_anthropic_models_endpoint_refusals_are_usage_errors(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, faults, said
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with serve_anthropic(**faults) as server:
        result = run_pytest(
            ENV,
            "--openenv-n=3",
            "--openenv-policy=anthropic",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=claude-typo",
        )
    text = refused(result, pytester)
    assert f"--openenv-model=claude-typo): {said}" in text


@pytest.mark.slow
def test_a_served_model_plays_and_is_checked_once_per_run(
    run_pytest, pytester: pytest.Pytester
) -> None:
    # Ollama lists a model with its tag: llama3.1 is llama3.1:latest
    with serve_openai(models=("llama3.1:latest",)) as server:
        result = run_pytest(
            ENV,
            "--openenv-n=4",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=llama3.1",
            *dist(2),
        )
        checks, completions = server.model_checks, server.requests
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert checks == 1  # the controller's, not one per worker
    assert completions > 0


@pytest.mark.slow
def test_a_replay_needs_no_endpoint(run_pytest, pytester: pytest.Pytester) -> None:
    cache = pytester.path / "cache"
    with serve_openai() as server:
        recorded = run_pytest(
            ENV,
            "--openenv-n=2",
            f"--openenv-llm-endpoint={server.base_url}",
            f"--openenv-model={MODEL}",
            f"--openenv-cache={cache}",
            "--openenv-output=first",
        )
    replayed = run_pytest(
        ENV,
        "--openenv-n=2",
        f"--openenv-llm-endpoint={DEAD}",
        f"--openenv-model={MODEL}",
        f"--openenv-cache={cache}",
        "--openenv-replay",
    )
    assert replayed.ret == recorded.ret
    assert "checked before any episode" not in replayed.stderr.str()
