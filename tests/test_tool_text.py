"""Tool calls read from a local model's text, in each format chat templates teach."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_openenv.policies.llm.tool_text import TextCall, parse_tool_calls

MOVE = TextCall("play_move", '{"action_id": 4}')


@pytest.mark.parametrize(
    "text",
    [
        # Hermes / Qwen
        '<tool_call>\n{"name": "play_move", "arguments": {"action_id": 4}}\n</tool_call>',
        # ... cut off before the closing tag
        '<tool_call>\n{"name": "play_move", "arguments": {"action_id": 4}}',
        # Llama 3.1, with and without the python tag, "parameters" for "arguments"
        '<|python_tag|>{"name": "play_move", "parameters": {"action_id": 4}}',
        '{"name": "play_move", "parameters": {"action_id": 4}}',
        # plain JSON, bare or fenced, OpenAI's nested shape
        '{"name": "play_move", "arguments": {"action_id": 4}}',
        '```json\n{"name": "play_move", "arguments": {"action_id": 4}}\n```',
        '{"type": "function", "function": {"name": "play_move", "arguments": {"action_id": 4}}}',
        # Mistral
        '[TOOL_CALLS] [{"name": "play_move", "arguments": {"action_id": 4}}]',
    ],
)
def test_each_format_gives_the_same_call(text: str) -> None:
    parsed = parse_tool_calls(text)
    assert parsed.calls == (MOVE,)
    assert parsed.content == ""


def test_text_around_a_call_is_the_content() -> None:
    parsed = parse_tool_calls(
        'I take the centre.\n<tool_call>{"name": "play_move", "arguments": {"action_id": 4}}'
        "</tool_call>"
    )
    assert parsed.calls == (MOVE,)
    assert parsed.content == "I take the centre."
    bare = parse_tool_calls('Centre: {"name": "play_move", "arguments": {"action_id": 4}} done')
    assert bare.calls == (MOVE,) and bare.content == "Centre:  done"


def test_several_calls_in_each_format() -> None:
    two = (MOVE, TextCall("play_move", '{"action_id": 0}'))
    hermes = (
        '<tool_call>{"name": "play_move", "arguments": {"action_id": 4}}</tool_call>\n'
        '<tool_call>{"name": "play_move", "arguments": {"action_id": 0}}</tool_call>'
    )
    llama = (
        '<|python_tag|>{"name": "play_move", "parameters": {"action_id": 4}}; '
        '{"name": "play_move", "parameters": {"action_id": 0}}'
    )
    listed = (
        '[{"name": "play_move", "arguments": {"action_id": 4}}, '
        '{"name": "play_move", "arguments": {"action_id": 0}}]'
    )
    for text in (hermes, llama, listed):
        assert parse_tool_calls(text).calls == two, text


def test_arguments_given_as_json_text_are_kept_as_sent() -> None:
    text = '<tool_call>{"name": "play_move", "arguments": "{\\"action_id\\": 4}"}</tool_call>'
    assert parse_tool_calls(text).calls == (TextCall("play_move", '{"action_id": 4}'),)


def test_a_malformed_tagged_call_is_still_a_call_for_the_env_to_refuse() -> None:
    broken = '<tool_call>{"name": "play_move", "arguments": {"action_id": 4}</tool_call>'
    (call,) = parse_tool_calls(broken).calls
    assert call.name == "play_move"
    with pytest.raises(ValueError):
        json.loads(call.arguments)  # the env answers "arguments are not valid JSON"
    (nameless,) = parse_tool_calls("<tool_call>play 4</tool_call>").calls
    assert nameless == TextCall("", "play 4")  # the env answers "unknown tool ''"


@pytest.mark.parametrize(
    "text",
    [
        "I will play 4.",
        "action_id: 1234567890",
        '{"action_id": 4}',  # no tool name: arguments alone are not a call
        '{"name": "play_move"}',  # no arguments
        "{not json at all",
        "",
    ],
)
def test_text_without_a_call_is_only_text(text: str) -> None:
    parsed = parse_tool_calls(text)
    assert parsed.calls == ()
    assert parsed.content == text.strip()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@given(
    name=st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True),
    arguments=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    form=st.sampled_from(["hermes", "python_tag", "bare", "fenced"]),
)
def test_any_call_survives_each_format(name: str, arguments: dict, form: str) -> None:
    key = "parameters" if form == "python_tag" else "arguments"
    body = json.dumps({"name": name, key: arguments})
    text = {
        "hermes": f"<tool_call>\n{body}\n</tool_call>",
        "python_tag": f"<|python_tag|>{body}",
        "bare": body,
        "fenced": f"```json\n{body}\n```",
    }[form]
    (call,) = parse_tool_calls(text).calls
    assert call.name == name
    assert json.loads(call.arguments) == arguments
