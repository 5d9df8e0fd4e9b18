"""``--openenv-policy=openai`` through the real ``openai`` SDK over HTTP, against our server.

Every fault a real endpoint or model produces ends as the documented outcome:
a model mistake is a tool error the model sees (the episode goes on), a
transport fault past the SDK's retries is an item *error* with status and
message, never an INTERNALERROR or a hang past ``--openenv-timeout``.
"""

from __future__ import annotations

import socket

import pytest
from llm_helpers import (
    ENV,
    MODEL,
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
    errors,
    junit_times,
    llm_args,
    openai_server_fixture,  # noqa: F401 - fixture
    output,
    results,
    scripted_rewards,
    turns_taken,
)
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer, serve_openai

from pytest_openenv.policies.base import Turn
from pytest_openenv.policies.llm.openai_chat import request_body, wire_messages


def test_openai_endpoint_drives_episodes_like_the_scripted_policy(
    run_pytest, pytester: pytest.Pytester, openai_server: OpenAICompatServer
) -> None:
    # the fake model plays the first legal action, as the scripted policy does
    expected = scripted_rewards(4)
    result = run_pytest(*llm_args(openai_server, n=4))
    rows = all_rows(pytester)
    assert {k: r["reward"] for k, r in rows.items()} == expected
    assert result.ret == (0 if all(r >= 0 for r in expected.values()) else 1)
    row = rows["ep-000000"]
    assert (row["policy"], row["model"]) == ("openai", MODEL)
    first = row["messages"][2]
    assert first["role"] == "assistant" and first["tool_calls"][0]["type"] == "function"
    assert isinstance(first["tool_calls"][0]["function"]["arguments"], str)
    assert row["messages"][3]["role"] == "tool"
    assert row["messages"][3]["tool_call_id"] == first["tool_calls"][0]["id"]
    # one request per turn, nothing more, through the standard library (the endpoint's
    # default path); token usage from the responses
    assert openai_server.requests == turns_taken(rows)
    assert all("(http.client)" in agent for agent in openai_server.user_agents)
    assert all(r["metrics"]["prompt_tokens"] > 0 for r in rows.values())
    completion = sum(r["metrics"]["completion_tokens"] for r in rows.values())
    assert completion == 12 * openai_server.requests  # 7 + 5 per tool call
    prompt = sum(r["metrics"]["prompt_tokens"] for r in rows.values())
    result.stdout.fnmatch_lines([f"tokens: {prompt} in / {completion} out"])
    # what went over the wire: sampling of a self-hosted endpoint, tools, clean messages
    body = openai_server.bodies[0]
    assert (body["model"], body["max_tokens"], body["temperature"]) == (MODEL, 256, 0.2)
    assert "max_completion_tokens" not in body
    assert body["tools"][0]["function"]["name"] == "play_move"
    assert body["tool_choice"] == "auto"  # some servers read a missing one as "none"
    later = openai_server.bodies[1]
    tool_message = next(m for m in later["messages"] if m["role"] == "tool")
    assert set(tool_message) == {"role", "tool_call_id", "content"}


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_model_mistakes_are_tool_errors_and_the_episode_goes_on(
    run_pytest, pytester: pytest.Pytester, workers: int
) -> None:
    faults = Faults(
        turn_faults={
            1: "malformed",
            2: "no_tool_call",
            3: "unknown_tool",
            4: "wrong_type",
            5: "illegal",
            6: "two_calls",
        }
    )
    with serve_openai(faults) as server:
        result = run_pytest(
            *llm_args(server, "--openenv-max-turns=14", "--openenv-min-reward=-1", n=3),
            *dist(workers),
        )
    assert result.ret == 0, result.stdout.str()
    rows = all_rows(pytester)
    assert sorted(rows) == ["ep-000000", "ep-000001", "ep-000002"]
    for row in rows.values():
        assert row["passed"] and row["done"]
        tool_errors = [t["result"]["error"] for t in row["tool_trace"] if t["result"]["error"]]
        assert "not valid JSON" in tool_errors[0]
        assert "unknown tool 'resign'" in tool_errors[1]
        assert "action_id must be an integer" in tool_errors[2]
        assert "is not legal now" in tool_errors[3]
        assert row["metrics"]["tool_errors"] >= 4
        reminders = [m for m in row["messages"] if m["role"] == "user"][1:]
        assert reminders and "did not call a tool" in reminders[0]["content"]
        two = [m for m in row["messages"] if len(m.get("tool_calls") or []) == 2]
        assert two or row["metrics"]["turns"] < 6
    assert server.requests == turns_taken(rows)


def test_a_model_that_never_calls_a_tool_fails_with_a_reason(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_openai(every_turn="no_tool_call") as server:
        result = run_pytest(*llm_args(server, "--openenv-max-turns=3", n=1))
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*ran out of turns*--openenv-max-turns=3*"])
    (row,) = all_rows(pytester).values()
    assert row["failure"]["outcome"] == "failed" and not row["done"]
    assert server.requests == 3


@pytest.mark.parametrize("client", ["http", "sdk"])
@pytest.mark.slow
def test_429_bursts_are_retried_honouring_retry_after(
    run_pytest, pytester: pytest.Pytester, client: str
) -> None:
    with serve_openai(statuses=[429, 429], retry_after=1.0) as server:
        result = run_pytest(
            *llm_args(server, "--openenv-min-reward=-1", f"--openenv-llm-client={client}", n=1)
        )
    assert result.ret == 0, result.stdout.str()
    assert server.statuses_sent[:3] == [429, 429, 200]
    assert ("(http.client)" in server.user_agents[0]) == (client == "http")
    # the SDK's own backoff would wait <= 1 s in total; Retry-After: 1 asks for 1 s each time
    gaps = [b - a for a, b in zip(server.arrivals[:2], server.arrivals[1:3], strict=True)]
    assert all(gap >= 0.95 for gap in gaps), gaps


@pytest.mark.parametrize("client", ["http", "sdk"])
@pytest.mark.slow
def test_500s_past_the_retries_are_an_error_with_status_and_message(
    run_pytest, pytester: pytest.Pytester, client: str
) -> None:
    with serve_openai(statuses=[500, 500], retry_after=0.05) as server:
        result = run_pytest(
            *llm_args(server, "--openenv-max-retries=1", "--openenv-min-reward=-1", n=2),
            f"--openenv-llm-client={client}",
        )
    assert result.ret == 1
    message = errors(pytester)["ep-000000"]
    assert "HTTP 500 after 1 retries: injected HTTP 500" in message
    # a server error is not remembered: the next episode asks again and passes
    assert all_rows(pytester)["ep-000001"]["passed"]
    assert server.statuses_sent[:2] == [500, 500]
    result.stdout.fnmatch_lines(["*ERROR*ep-000000*", "*1 passed, 1 error*"])


@pytest.mark.parametrize("workers", [2])  # -n 0: test_llm_anthropic's hang test
@pytest.mark.slow
def test_a_hung_response_errors_within_the_timeout(
    run_pytest, pytester: pytest.Pytester, workers: int
) -> None:
    with serve_openai(hang=True) as server:
        result = run_pytest(
            *llm_args(server, "--openenv-timeout=1.5", n=2),
            "--junitxml=junit.xml",
            *dist(workers),
            timeout=120,
        )
    assert result.ret == 1
    assert set(errors(pytester)) == {"ep-000000", "ep-000001"}
    for message in errors(pytester).values():
        assert "timed out" in message or "exceeded --openenv-timeout=1.5s" in message
    # each item's setup + call + teardown stays within the timeout and its grace
    times = junit_times(pytester.path / "junit.xml")
    assert len(times) == 2 and all(t < 1.5 + 1.5 for t in times.values()), times


def test_a_refused_key_is_detected_once(run_pytest, pytester: pytest.Pytester) -> None:
    with serve_openai(always_status=401) as server:
        result = run_pytest(*llm_args(server, n=3))
    assert result.ret == 1
    found = errors(pytester)
    assert sorted(found) == ["ep-000000", "ep-000001", "ep-000002"]
    first = found["ep-000000"]
    assert "HTTP 401" in first and "injected HTTP 401" in first
    # the SDK does not retry 401; later episodes fail at once with the same message
    assert server.requests == 1
    said = first.split(": ", 1)[1]  # after "policy unavailable during ep-000000: "
    assert said in found["ep-000001"] and said in found["ep-000002"]
    assert "first seen in ep-000000" in found["ep-000002"]


@pytest.mark.slow
def test_an_unreachable_endpoint_is_detected_once(run_pytest, pytester: pytest.Pytester) -> None:
    with serve_openai(drop=True) as server:
        result = run_pytest(*llm_args(server, "--openenv-max-retries=1", n=3))
    assert result.ret == 1
    found = errors(pytester)
    assert len(found) == 3
    assert "is unreachable after 1 retries" in found["ep-000000"]
    assert found["ep-000000"].split(": ", 1)[1] in found["ep-000002"]
    assert server.requests == 2  # one call and one retry, for the first episode only


@pytest.mark.slow
def test_a_closed_port_is_one_usage_error_not_a_crash(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_pytest(
        ENV,
        "--openenv-n=2",
        f"--openenv-llm-endpoint=http://127.0.0.1:{port}/v1",
        f"--openenv-model={MODEL}",
        "--openenv-max-retries=0",
    )
    # checked before any episode (as env servers are): one usage error, no errored items
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"127.0.0.1:{port}/v1 (--openenv-policy=openai" in result.stderr.str()
    assert "unreachable" in result.stderr.str()
    assert not (output(pytester) / "failures.jsonl").exists()


@pytest.mark.slow
def test_reasoning_models_on_the_official_api_get_max_completion_tokens(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_openai() as server:
        # the official client, pointed at our server the way the SDK allows
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-official-0000")
        result = run_pytest(
            ENV, "--openenv-n=1", "--openenv-policy=openai", "--openenv-model=o3-mini"
        )
        assert result.ret in (0, 1), result.stdout.str()
        body = server.bodies[0]
        assert body["max_completion_tokens"] == 256
        assert "max_tokens" not in body and "temperature" not in body
        assert results(pytester) or all_rows(pytester)


def test_the_http_client_on_the_official_api_sends_what_the_sdk_would(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_openai() as server:
        # OPENAI_BASE_URL, as the SDK reads it; the key as a Bearer token
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-official-0000")
        result = run_pytest(
            ENV,
            "--openenv-n=1",
            "--openenv-policy=openai",
            "--openenv-model=o3-mini",
            "--openenv-llm-client=http",
        )
        assert result.ret in (0, 1), result.stdout.str()
        body = server.bodies[0]
        assert body["max_completion_tokens"] == 256 and "seed" not in body
        assert "(http.client)" in server.user_agents[0]
        assert server.authorizations[0] == "Bearer sk-test-official-0000"
        assert server.paths_seen[0] == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("model", "official", "expected"),
    [
        ("o3-mini", True, {"max_completion_tokens": 64}),
        ("o1", True, {"max_completion_tokens": 64}),
        ("gpt-5-mini", True, {"max_completion_tokens": 64}),
        ("gpt-4o-mini", True, {"max_tokens": 64, "temperature": 0.5}),
        # self-hosted endpoints keep max_tokens whatever the model is called
        ("o3-mini", False, {"max_tokens": 64, "temperature": 0.5, "seed": 7}),
        (
            "meta-llama/Llama-3.1-8B-Instruct",
            False,
            {"max_tokens": 64, "temperature": 0.5, "seed": 7},
        ),
    ],
)
def test_sampling_parameters_by_model_family(model: str, official: bool, expected: dict) -> None:
    turn = Turn(
        messages=[{"role": "user", "content": "hi"}], tools=[], episode_id="e", seed=7, turn=1
    )
    body = request_body(model, turn, temperature=0.5, max_tokens=64, official=official)
    sampling = {k: v for k, v in body.items() if k not in ("model", "messages", "tools")}
    assert sampling == expected


def test_each_repeat_of_an_episode_gets_its_own_sampling_seed() -> None:
    def seed(episode_seed: int, repeat: int) -> int:
        turn = Turn(messages=[], tools=[], episode_id="e", seed=episode_seed, turn=1, repeat=repeat)
        return request_body("m", turn, temperature=1.0, max_tokens=8, official=False)["seed"]

    assert seed(5, 0) == 5
    assert len({seed(5, r) for r in range(4)}) == 4
    assert 0 <= seed(2**40, 3) < 2**31


def test_wire_messages_keep_only_fields_the_api_accepts() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}], "extra": 1},
        {"role": "tool", "tool_call_id": "1", "name": "play_move", "content": "ok"},
    ]
    assert wire_messages(messages) == [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "ok"},
    ]
