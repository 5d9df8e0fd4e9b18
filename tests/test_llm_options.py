"""LLM policy options: bad input is a usage error naming what is wrong and what would be right."""

from __future__ import annotations

import json
import re

import pytest
from llm_helpers import (
    ENV,
    MODEL,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    llm_args,
    output,
)
from servers.anthropic_messages import serve_anthropic
from servers.openai_compat import serve_openai

from pytest_openenv.config.options import OPTIONS
from pytest_openenv.config.settings import LLMSettings, Settings
from pytest_openenv.policies.llm.openai_chat import (
    OpenAIHTTPPolicy,
    OpenAIPolicy,
    build_openai_policy,
)

ENDPOINT = "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("client", "endpoint", "expected"),
    [
        # an endpoint needs only the wire format: the standard library carries it
        ("auto", ENDPOINT, OpenAIHTTPPolicy),
        ("auto", None, OpenAIPolicy),  # the official API keeps OpenAI's own client
        ("sdk", ENDPOINT, OpenAIPolicy),
        ("http", None, OpenAIHTTPPolicy),
    ],
)
def test_the_llm_client_option_picks_what_carries_openai_requests(
    monkeypatch: pytest.MonkeyPatch, client: str, endpoint: str | None, expected: type
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    settings = Settings(llm=LLMSettings(model=MODEL, endpoint=endpoint, client=client))
    policy = build_openai_policy(settings)
    assert type(policy) is expected


def test_the_http_client_needs_no_sdk_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a)
    )
    settings = Settings(llm=LLMSettings(model=MODEL, endpoint=ENDPOINT))
    assert isinstance(build_openai_policy(settings), OpenAIHTTPPolicy)
    with pytest.raises(pytest.UsageError, match="needs the openai SDK, which is not installed"):
        build_openai_policy(Settings(llm=LLMSettings(model=MODEL, endpoint=ENDPOINT, client="sdk")))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--openenv-policy=openai"], "*--openenv-policy=openai needs --openenv-model*"),
        (
            ["--openenv-policy=openai", "--openenv-model=gpt-4o-mini"],
            "*needs an API key: set OPENAI_API_KEY in the environment*",
        ),
        (
            ["--openenv-policy=anthropic", "--openenv-model=claude-sonnet-4-5"],
            "*needs an API key: set ANTHROPIC_API_KEY in the environment*",
        ),
        (["--openenv-concurrency=0"], "*--openenv-concurrency='0' is invalid: expected a pos*"),
    ],
)
def test_bad_llm_setup_is_a_usage_error(run_pytest, args: list[str], message: str) -> None:
    result = run_pytest(ENV, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("concurrency", "0", "expected a positive integer"),
        ("timeout", "0", "expected a number of seconds > 0"),
        ("timeout", "soon", "expected a number"),
        ("max-retries", "-1", "expected an integer >= 0"),
        ("temperature", "hot", "expected a number"),
        ("temperature", "-0.1", "expected a number >= 0"),
        ("max-tokens", "0", "expected a positive integer"),
        ("llm-endpoint", "localhost:8000", "expected an http(s) base URL such as"),
        ("replay", "maybe", "expected true or false"),
        ("llm-client", "curl", "expected one of auto, http, sdk"),
    ],
)
def test_bad_llm_option_values_name_the_option(flag: str, value: str, message: str) -> None:
    (option,) = [o for o in OPTIONS if o.flag == flag]
    with pytest.raises(pytest.UsageError, match=rf"--openenv-{flag}='{value}' is invalid: .*"):
        option.convert(flag, value)
    with pytest.raises(pytest.UsageError, match=re.escape(message)):
        option.convert(flag, value)


def test_good_llm_option_values_convert() -> None:
    convert = {o.flag: o.convert for o in OPTIONS}
    assert convert["concurrency"]("concurrency", "16") == 16
    assert convert["timeout"]("timeout", "1.5") == 1.5
    assert convert["max-retries"]("max-retries", "0") == 0
    assert convert["temperature"]("temperature", "0") == 0.0
    assert convert["llm-endpoint"]("llm-endpoint", " http://h:8000/v1 ") == "http://h:8000/v1"
    assert convert["replay"]("replay", "true") is True


@pytest.mark.parametrize(("provider", "extra"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_a_missing_sdk_names_the_extra(
    run_pytest,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    extra: str,
) -> None:
    blocked = pytester.mkdir("blocked")
    (blocked / provider).mkdir()
    (blocked / provider / "__init__.py").write_text("raise ImportError('not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", str(blocked))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    # a loopback server answers the model check, so only the SDK is missing; openai's
    # requests go through its SDK as they do against the official API
    serve = serve_openai if provider == "openai" else serve_anthropic
    client = ["--openenv-llm-client=sdk"] if provider == "openai" else []
    with serve() as server:
        result = run_pytest(*llm_args(server, *client, policy=provider))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*pip install 'pytest-openenv[[]{extra}[]]'*"])


def test_endpoint_credentials_and_settings_in_metadata(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_openai() as server:
        base_url = server.base_url
        endpoint = base_url.replace("http://", "http://alice:s3cretpw@")
        result = run_pytest(
            ENV,
            "--openenv-n=1",
            f"--openenv-llm-endpoint={endpoint}",
            f"--openenv-model={MODEL}",
            "--openenv-temperature=0",
            "--openenv-max-tokens=64",
            "--openenv-concurrency=2",
        )
        assert server.requests > 0
    assert result.ret in (0, 1), result.stdout.str()
    metadata = json.loads((output(pytester) / "metadata.json").read_text())
    llm = metadata["settings"]["llm"]
    assert llm["endpoint"] == base_url
    assert (llm["model"], llm["temperature"], llm["max_tokens"]) == (MODEL, 0.0, 64)
    assert llm["concurrency"] == 2 and metadata["settings"]["policy"] == "openai"
    for path in output(pytester).rglob("*"):
        assert b"s3cretpw" not in path.read_bytes(), path
    assert "s3cretpw" not in result.stdout.str() + result.stderr.str()
