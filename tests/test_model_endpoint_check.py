"""Model endpoints are checked once before any episode, as env servers are: a dead
endpoint, a refused key or a model the endpoint does not serve is one usage error (exit 4)
naming endpoint, model and what answered; ``--openenv-replay`` needs no endpoint. Each
request of the check is bounded as a whole, keeps the key from other origins through
redirects, and sends the endpoint URL's credentials as the run does."""

from __future__ import annotations

import base64
import json
import time

import pytest
from llm_helpers import ENV, MODEL, clean_sdk_env_fixture, dist, output  # noqa: F401 - fixture
from servers.anthropic_messages import serve_anthropic
from servers.openai_compat import serve_openai
from servers.scripted_http import (
    ScriptedHTTP,
    answer_json,
    basic_only,
    garbled_chunks,
    redirect,
    trickled,
)

from pytest_openenv.config.settings import LLMSettings, Settings
from pytest_openenv.controller.model_check import CHECK_TIMEOUT, endpoint_problem

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


# -- the check's requests: bounded as a whole, the key kept to its origin, garbage a usage error --
LONG_LIST = json.dumps({"object": "list", "data": [{"id": f"m{i}"} for i in range(40)]}).encode()


@pytest.mark.slow
def test_a_trickled_model_list_is_given_up_on_at_the_checks_bound(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """One byte every 2 s: each read succeeds, so a per-read timeout held the run for ever."""
    with ScriptedHTTP({"/v1/models": trickled(LONG_LIST, every=2.0)}) as server:
        started = time.monotonic()
        result = run_pytest(
            ENV,
            "--openenv-n=2",
            f"--openenv-llm-endpoint={server.url}/v1",
            "--openenv-model=m",
            timeout=90,
        )
        took = time.monotonic() - started
    text = refused(result, pytester)
    assert f"--openenv-model=m): unreachable (no whole answer within {CHECK_TIMEOUT:g} s)" in text
    assert took < CHECK_TIMEOUT + 30, took


def test_the_key_does_not_follow_a_redirect_to_another_origin(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with ScriptedHTTP({"/v1/models": answer_json({"data": [{"id": "served"}]})}) as away:
        moved = {
            "/v1/models": redirect(f"{away.url}/v1/models"),
            "/v1/models/x": redirect(f"{away.url}/v1/models/x", status=307),
        }
        with ScriptedHTTP(moved) as home:
            result = run_pytest(
                ENV, "--openenv-n=2", f"--openenv-llm-endpoint={home.url}/v1", "--openenv-model=x"
            )
    text = refused(result, pytester)
    assert "--openenv-model=x): does not serve the model (GET /models lists served)" in text
    assert [s.headers.get("authorization") for s in home.requests] == [f"Bearer {KEY}"] * 2
    assert away.paths() == ["/v1/models", "/v1/models/x"]  # followed, without the key
    assert not any("authorization" in seen.headers for seen in away.requests)


@pytest.mark.parametrize("status", [200, 500])
def test_a_garbled_model_list_is_a_usage_error_not_an_internal_error(
    run_pytest, pytester: pytest.Pytester, status: int
) -> None:
    with ScriptedHTTP({"/v1/models": garbled_chunks(status)}) as server:
        result = run_pytest(  # run_pytest asserts no INTERNALERROR
            ENV, "--openenv-n=2", f"--openenv-llm-endpoint={server.url}/v1", "--openenv-model=m"
        )
    text = refused(result, pytester)
    assert "--openenv-model=m): unreachable (a broken HTTP answer (IncompleteRead" in text


def basic_endpoint(server: ScriptedHTTP, password: str) -> Settings:
    port = server.url.rsplit(":", 1)[1]
    return Settings(llm=LLMSettings(endpoint=f"http://user:{password}@127.0.0.1:{port}/v1"))


def test_credentials_in_the_endpoint_url_are_checked_as_the_run_sends_them() -> None:
    """The check sent ``Bearer EMPTY`` instead, and refused a working Basic-auth endpoint."""
    listing = answer_json({"data": [{"id": "m"}]})
    with ScriptedHTTP({"/v1/models": basic_only("user", "pw-right", listing)}) as server:
        accepted = endpoint_problem("openai", "m", basic_endpoint(server, "pw-right"))
        wrong = endpoint_problem("openai", "m", basic_endpoint(server, "pw-wrong"))
    assert accepted is None
    assert wrong is not None and wrong.startswith("refused the key (HTTP 401: wrong credentials)")
    assert "check the user and password in --openenv-llm-endpoint" in wrong
    assert "pw-" not in wrong
    basic = "Basic " + base64.b64encode(b"user:pw-right").decode()
    assert server.requests[0].headers.get("authorization") == basic
