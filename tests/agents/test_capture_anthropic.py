"""Claude Code's dialect: Anthropic Messages through the real ``anthropic`` SDK, whole and
streamed, answered by a chat upstream (translated both ways) or an Anthropic one."""

from __future__ import annotations

import anthropic
import pytest
from capture_helpers import (
    KEY,
    PLAY_MOVE,
    TASK,
    UPSTREAM_MODEL,
    proxy_to,
    upstream_key_fixture,  # noqa: F401 - fixture
)

TOOL = {
    "name": "play_move",
    "description": "Play one legal action.",
    "input_schema": PLAY_MOVE["function"]["parameters"],
}
SYSTEM = [{"type": "text", "text": "You are an agent."}, {"type": "text", "text": "Be brief."}]


def client(proxy, token: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.base_url, api_key=token, max_retries=0)


def ask(sdk: anthropic.Anthropic, messages: list[dict], stream: bool = False):
    kwargs = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 512,
        "system": SYSTEM,
        "tools": [TOOL],
        "messages": messages,
    }
    if stream:
        with sdk.messages.stream(**kwargs) as events:
            kinds = [e.type for e in events]
            return events.get_final_message(), kinds
    return sdk.messages.create(**kwargs), []


def two_turns(sdk: anthropic.Anthropic, stream: bool) -> tuple[list, list]:
    """A turn, its tool result (with text after it, as Claude Code sends), the next turn."""
    first, kinds = ask(sdk, [{"role": "user", "content": TASK}], stream)
    use = next(b for b in first.content if b.type == "tool_use")
    history = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "Legal actions: 4, 8"},
                {"type": "text", "text": "Go on."},
            ],
        },
    ]
    second, _ = ask(sdk, history, stream)
    return [first, second], kinds


@pytest.mark.parametrize("upstream", ["chat", "anthropic"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_messages_calls_are_answered_and_recorded_in_chat_form(
    upstream_key: str, upstream: str, stream: bool
) -> None:
    with proxy_to(upstream) as (proxy, server):
        session = proxy.open_session()
        (first, second), kinds = two_turns(client(proxy, session.token), stream)

        assert first.stop_reason == "tool_use" and second.stop_reason == "tool_use"
        assert [b.input for b in first.content if b.type == "tool_use"] == [{"action_id": 3}]
        assert [b.input for b in second.content if b.type == "tool_use"] == [{"action_id": 4}]
        assert first.usage.input_tokens == server.served[0][0]
        assert first.usage.output_tokens == server.served[0][1]
        if stream:
            assert kinds[0] == "message_start" and "content_block_stop" in kinds
            assert kinds[-1] == "message_stop"
        # the record: system joined, tool result before the text that followed it
        call = session.calls[1]
        assert call.dialect == "anthropic"
        assert [m["role"] for m in call.request_messages] == [
            "system",
            "user",
            "assistant",
            "tool",
            "user",
        ]
        assert call.request_messages[0]["content"] == "You are an agent.\n\nBe brief."
        use_id = next(b.id for b in first.content if b.type == "tool_use")
        assert call.request_messages[2]["tool_calls"][0]["id"] == use_id
        assert call.request_messages[3] == {
            "role": "tool",
            "tool_call_id": use_id,
            "content": "Legal actions: 4, 8",
        }
        assert call.tools == [PLAY_MOVE]
        assert call.response_message["tool_calls"][0]["function"]["arguments"] == (
            '{"action_id": 4}'
        )
        # what the upstream got, in its own dialect, with the run's model and key
        body = server.bodies[1]
        assert body["model"] == UPSTREAM_MODEL
        if upstream == "anthropic":
            assert body["system"] == "You are an agent.\n\nBe brief."
            assert body["tools"] == [TOOL]
            assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
            assert [b["type"] for b in body["messages"][2]["content"]] == ["tool_result", "text"]
        else:
            assert server.authorizations[1] == f"Bearer {KEY}"
            assert body["tools"] == [PLAY_MOVE]


def test_count_tokens_and_the_probes_the_cli_makes_are_answered(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        counted = sdk.messages.count_tokens(
            model="claude-sonnet-4-5", messages=[{"role": "user", "content": TASK * 10}]
        )
        assert counted.input_tokens > len(TASK * 10) // 8
        assert [m.id for m in sdk.models.list()] == [UPSTREAM_MODEL]
        import httpx

        assert httpx.head(proxy.base_url).status_code == 200
        assert server.requests == 0  # nothing of this is a model call
        assert session.calls == []


def test_a_bad_token_gets_the_anthropic_401(upstream_key: str) -> None:
    with proxy_to("anthropic") as (proxy, server):
        with pytest.raises(anthropic.AuthenticationError) as refused:
            ask(client(proxy, "wrong"), [{"role": "user", "content": TASK}])
        assert refused.value.body["error"]["type"] == "authentication_error"
        assert server.requests == 0
