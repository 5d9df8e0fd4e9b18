"""The capture proxy in front of a real model: llama.cpp serving SmolLM2-135M.

Our fakes answer as we wrote them to; llama.cpp answers as a real OpenAI-compatible server
does (its own ids, usage, finish reasons, a small model's prose or grammar-bound calls).
A Claude Code-shaped and a Codex-shaped client, both streaming, must get answers their SDKs
read, and the record must hold what the model said.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import openai
import pytest
from capture_helpers import PLAY_MOVE, TASK
from servers.llama_server import MODEL_ALIAS, LlamaServer

from pytest_openenv.agents.capture import CaptureProxy, Upstream

#: the run pins these: the agents ask for far more
PINNED = {"temperature": 0, "max_tokens": 32}


@pytest.fixture(scope="module")
def proxy() -> Iterator[CaptureProxy]:
    server = LlamaServer().start()
    upstream = Upstream(server.base_url, "chat", None, MODEL_ALIAS, 120.0, PINNED)
    try:
        with CaptureProxy(upstream) as running:
            yield running
    finally:
        server.stop()


def assert_recorded(call, usage: tuple[int, int]) -> None:
    assert call.answered and call.stream
    assert (call.usage["prompt_tokens"], call.usage["completion_tokens"]) == usage
    assert usage[0] > 0 and 0 < usage[1] <= PINNED["max_tokens"]
    message = call.response_message
    assert message["role"] == "assistant"
    assert message.get("content") or message.get("tool_calls")
    for tool_call in message.get("tool_calls", []):
        assert isinstance(tool_call["function"]["arguments"], str)


@pytest.mark.slow
def test_a_streamed_messages_call_is_answered_by_a_real_model(proxy: CaptureProxy) -> None:
    session = proxy.open_session()
    sdk = anthropic.Anthropic(base_url=proxy.base_url, api_key=session.token, max_retries=0)
    tool = {"name": "play_move", "input_schema": PLAY_MOVE["function"]["parameters"]}
    with sdk.messages.stream(
        model="claude-sonnet-4-5",
        max_tokens=4096,
        system="You play tic-tac-toe.",
        tools=[tool],
        messages=[{"role": "user", "content": TASK}],
    ) as events:
        final = events.get_final_message()

    [call] = session.calls
    assert_recorded(call, (final.usage.input_tokens, final.usage.output_tokens))
    said = "".join(b.text for b in final.content if b.type == "text")
    assert said == (call.response_message.get("content") or "")
    uses = [b for b in final.content if b.type == "tool_use"]
    assert len(uses) == len(call.response_message.get("tool_calls", []))


@pytest.mark.slow
def test_a_streamed_responses_call_is_answered_by_a_real_model(proxy: CaptureProxy) -> None:
    session = proxy.open_session()
    sdk = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.token, max_retries=0)
    with sdk.responses.stream(
        model="gpt-5-codex",
        instructions="Answer in one short sentence.",
        input=[{"role": "user", "content": "What game has X and O?"}],
        store=False,
    ) as events:
        last = list(events)[-1]

    # an answer cut at max_tokens ends as the API ends it, incomplete (Codex reports it)
    [call] = session.calls
    final = last.response
    cut = call.usage["completion_tokens"] == PINNED["max_tokens"]
    assert (last.type, final.status) == (
        ("response.incomplete", "incomplete") if cut else ("response.completed", "completed")
    )
    assert_recorded(call, (final.usage.input_tokens, final.usage.output_tokens))
    assert final.output_text == call.response_message["content"]
    assert json.dumps(call.request_messages[0]) == json.dumps(
        {"role": "system", "content": "Answer in one short sentence."}
    )
