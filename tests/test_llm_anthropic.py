"""``--openenv-policy=anthropic`` through the real ``anthropic`` SDK against our Messages server.

Transcripts are stored in OpenAI chat format whatever the provider, so the
dataset is uniform; the wire format is Messages (system apart, ``tool_use`` and
``tool_result`` blocks).
"""

from __future__ import annotations

import pytest
from llm_helpers import (
    MODEL,
    all_rows,
    anthropic_server_fixture,  # noqa: F401 - fixture
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
    errors,
    junit_times,
    llm_args,
    scripted_rewards,
    turns_taken,
)
from servers.anthropic_messages import AnthropicMessagesServer, serve_anthropic
from servers.fake_model import Faults


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_anthropic_drives_episodes_and_stores_openai_format(
    run_pytest, pytester: pytest.Pytester, anthropic_server: AnthropicMessagesServer, workers: int
) -> None:
    expected = scripted_rewards(3)
    result = run_pytest(*llm_args(anthropic_server, n=3, policy="anthropic"), *dist(workers))
    assert result.ret in (0, 1), result.stdout.str()
    rows = all_rows(pytester)
    assert {k: r["reward"] for k, r in rows.items()} == expected
    row = rows["ep-000000"]
    assert (row["policy"], row["model"]) == ("anthropic", MODEL)
    roles = [m["role"] for m in row["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "tool"]
    call = row["messages"][2]["tool_calls"][0]
    assert call["id"].startswith("toolu_") and call["function"]["name"] == "play_move"
    assert isinstance(call["function"]["arguments"], str)
    assert row["messages"][3]["tool_call_id"] == call["id"]
    assert (
        row["metrics"]["prompt_tokens"] > 0
        and row["metrics"]["completion_tokens"] == 12 * (row["metrics"]["turns"])
    )
    assert anthropic_server.requests == turns_taken(rows)
    # the Messages wire format: system apart, tool_use answered by tool_result blocks
    body = next(b for b in anthropic_server.bodies if len(b["messages"]) >= 3)
    assert "playing a game" in body["system"] and body["max_tokens"] == 256
    assert body["tools"][0]["input_schema"]["required"] == ["action_id"]
    assistant, answer = body["messages"][1], body["messages"][2]
    assert assistant["role"] == "assistant" and assistant["content"][0]["type"] == "tool_use"
    assert answer["role"] == "user" and answer["content"][0]["type"] == "tool_result"
    assert answer["content"][0]["tool_use_id"] == assistant["content"][0]["id"]


@pytest.mark.slow
def test_anthropic_model_mistakes_are_tool_errors(run_pytest, pytester: pytest.Pytester) -> None:
    kinds = ("malformed", "no_tool_call", "unknown_tool", "illegal")
    faults = Faults(turn_faults=dict(enumerate(kinds, start=1)))
    with serve_anthropic(faults) as server:
        result = run_pytest(
            *llm_args(
                server, "--openenv-max-turns=12", "--openenv-min-reward=-1", policy="anthropic"
            )
        )
    assert result.ret == 0, result.stdout.str()
    for row in all_rows(pytester).values():
        tool_errors = [t["result"]["error"] for t in row["tool_trace"] if t["result"]["error"]]
        # a Messages tool_use input that is not an object reaches the env as non-object JSON
        assert "must be a JSON object" in tool_errors[0]
        assert "unknown tool 'resign'" in tool_errors[1]
        assert "is not legal now" in tool_errors[2]
    # tool errors travel back to the model flagged as errors
    flagged = [
        block
        for body in server.bodies
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result" and block.get("is_error")
    ]
    assert flagged


@pytest.mark.slow
def test_anthropic_transport_faults(run_pytest, pytester: pytest.Pytester) -> None:
    # a 429 burst within the retries passes; 500s past them error with status and message
    with serve_anthropic(statuses=[429, 500, 500], retry_after=0.05) as server:
        result = run_pytest(
            *llm_args(
                server,
                "--openenv-max-retries=1",
                "--openenv-min-reward=-1",
                n=2,
                policy="anthropic",
            )
        )
    assert result.ret == 1
    assert server.statuses_sent[:4] == [429, 500, 500, 200]
    rows = all_rows(pytester)
    message = errors(pytester)["ep-000000"]
    assert "anthropic API error" in message and "HTTP 500 after 1 retries" in message
    assert rows["ep-000001"]["passed"]


@pytest.mark.slow
def test_anthropic_hang_errors_within_the_timeout(run_pytest, pytester: pytest.Pytester) -> None:
    with serve_anthropic(hang=True) as server:
        result = run_pytest(
            *llm_args(server, "--openenv-timeout=1", n=2, policy="anthropic"),
            "--junitxml=junit.xml",
            timeout=120,
        )
    assert result.ret == 1
    assert len(errors(pytester)) == 2
    times = junit_times(pytester.path / "junit.xml")
    assert all(t < 1 + 1.5 for t in times.values()), times


@pytest.mark.slow
def test_anthropic_refused_key_is_detected_once(run_pytest, pytester: pytest.Pytester) -> None:
    with serve_anthropic(always_status=403) as server:
        result = run_pytest(*llm_args(server, n=3, policy="anthropic"))
    assert result.ret == 1
    found = errors(pytester)
    assert len(found) == 3 and "HTTP 403" in found["ep-000000"]
    assert server.requests == 1
