"""Codex's dialect: OpenAI Responses through the real ``openai`` SDK, whole and streamed,
answered by a chat or an Anthropic upstream, recorded in chat form."""

from __future__ import annotations

import json

import openai
import pytest
from capture_helpers import (
    PLAY_MOVE,
    TASK,
    UPSTREAM_MODEL,
    proxy_to,
    upstream_key_fixture,  # noqa: F401 - fixture
)
from servers.agent_model import AgentModelServer
from servers.fake_model import Faults

TOOL = {"type": "function", "strict": False, **PLAY_MOVE["function"]}
INSTRUCTIONS = "You are a coding agent."


def client(proxy, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=token, max_retries=0)


def ask(sdk: openai.OpenAI, items: list[dict], stream: bool, tools: list | None = None):
    kwargs = {
        "model": "gpt-5-codex",
        "instructions": INSTRUCTIONS,
        "input": items,
        "tools": tools or [TOOL],
        "store": False,
    }
    if stream:
        with sdk.responses.stream(**kwargs) as events:
            kinds = [e.type for e in events]
            return events.get_final_response(), kinds
    return sdk.responses.create(**kwargs), []


@pytest.mark.parametrize("upstream", ["chat", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_calls_are_answered_and_recorded_in_chat_form(
    upstream_key: str, upstream: str, stream: bool
) -> None:
    with proxy_to(upstream) as (proxy, server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        developer = {"type": "message", "role": "developer", "content": "Sandbox: none."}
        user = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": TASK}],
        }
        first, kinds = ask(sdk, [developer, user], stream)

        [call] = [item for item in first.output if item.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("play_move", {"action_id": 3})
        assert first.status == "completed"
        assert first.usage.input_tokens == server.served[0][0]
        if stream:
            assert kinds[:2] == ["response.created", "response.in_progress"]
            assert "response.function_call_arguments.delta" in kinds
            assert kinds[-1] == "response.completed"

        history = [
            developer,
            user,
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "Legal actions: 4"},
        ]
        second, _ = ask(sdk, history, stream)
        [next_call] = [item for item in second.output if item.type == "function_call"]
        assert json.loads(next_call.arguments) == {"action_id": 4}

        recorded = session.calls[1]
        assert recorded.dialect == "responses"
        assert recorded.request_messages == [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "system", "content": "Sandbox: none."},
            {"role": "user", "content": TASK},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": "play_move", "arguments": call.arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call.call_id, "content": "Legal actions: 4"},
        ]
        assert recorded.tools == [PLAY_MOVE]
        assert server.bodies[1]["model"] == UPSTREAM_MODEL


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_text_answer_is_an_output_message(upstream_key: str, stream: bool) -> None:
    with proxy_to("chat", Faults(every_turn="no_tool_call")) as (proxy, _server):
        session = proxy.open_session()
        answer, kinds = ask(
            client(proxy, session.token), [{"role": "user", "content": TASK}], stream
        )
        assert answer.output_text == "I would play 3."
        assert answer.output[0].type == "message"
        if stream:
            assert "response.output_text.delta" in kinds
        assert session.calls[0].response_message["content"] == answer.output_text


def test_a_custom_tool_call_goes_back_as_a_custom_tool_call(upstream_key: str) -> None:
    patch = {"type": "custom", "name": "play_move", "description": "A move, free-form."}
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        answer, _ = ask(
            client(proxy, session.token), [{"role": "user", "content": TASK}], False, [patch]
        )
        [item] = answer.output
        assert item.type == "custom_tool_call" and item.name == "play_move"
        # the fake model sent {"action_id": 3}: no "input" field, so the text is kept whole
        assert json.loads(item.input) == {"action_id": 3}
        sent = server.bodies[0]["tools"][0]["function"]
        assert sent["parameters"]["required"] == ["input"]


def test_a_stateful_request_is_refused_with_a_reason(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        with pytest.raises(openai.BadRequestError, match="previous_response_id"):
            client(proxy, session.token).responses.create(
                model="m", input="Hi", previous_response_id="resp_1"
            )
        assert server.requests == 0


def test_a_namespaced_tool_is_one_function_upstream_and_a_namespaced_call_back(
    upstream_key: str,
) -> None:
    # Codex offers each MCP server's tools in a namespace
    namespace = {
        "type": "namespace",
        "name": "mcp__openenv",
        "description": "Tools in the mcp__openenv namespace.",
        "tools": [TOOL],
    }
    hosted = {"type": "web_search"}
    # this model calls the offered tool whose name ends in play_move, whatever its prefix
    with proxy_to("chat", model_server=AgentModelServer) as (proxy, server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        user = {"role": "user", "content": TASK}
        first, _ = ask(sdk, [user], True, [namespace, hosted])
        [call] = first.output
        assert (call.type, call.namespace, call.name) == (
            "function_call",
            "mcp__openenv",
            "play_move",
        )

        back = {
            "type": "function_call",
            "call_id": call.call_id,
            "namespace": call.namespace,
            "name": call.name,
            "arguments": call.arguments,
        }
        result = {"type": "function_call_output", "call_id": call.call_id, "output": "ok"}
        ask(sdk, [user, back, result], False, [namespace, hosted])

        [offered] = server.bodies[0]["tools"]  # the hosted tool is no function to offer
        assert offered["function"]["name"] == "mcp__openenv__play_move"
        sent = session.calls[1].request_messages[2]["tool_calls"][0]["function"]
        assert sent["name"] == "mcp__openenv__play_move"
