"""Tool calls across wire formats: OpenAI responses, Anthropic blocks, and back (hypothesis)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from pytest_openenv.policies.base import Turn
from pytest_openenv.policies.llm.anthropic_messages import (
    EMPTY_TURN,
    from_anthropic,
    to_anthropic,
    to_anthropic_tools,
)
from pytest_openenv.policies.llm.openai_chat import parse_response, parse_tool_call

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
names = text.filter(bool)
scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
objects = st.dictionaries(text, json_values, max_size=4)
tool_uses = st.lists(st.tuples(names, objects), max_size=3)

TURN = Turn(messages=[], tools=[], episode_id="ep-000000", seed=0, turn=2)


@given(text, tool_uses, st.integers(0, 10**5), st.integers(0, 10**5))
def test_anthropic_blocks_survive_the_openai_transcript(
    said: str, uses: list, tokens_in: int, tokens_out: int
) -> None:
    blocks = [{"type": "text", "text": said}] if said else []
    blocks += [
        {"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": args}
        for i, (n, args) in enumerate(uses)
    ]
    reply = from_anthropic(blocks, {"input_tokens": tokens_in, "output_tokens": tokens_out})
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (tokens_in, tokens_out)
    assert [json.loads(c.arguments) for c in reply.tool_calls] == [a for _, a in uses]
    # stored as OpenAI chat, sent back as Messages: the same blocks the model produced
    transcript = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "go"},
        reply.to_openai(),
    ]
    system, turns = to_anthropic(transcript)
    assert system == "rules"
    assert turns[0] == {"role": "user", "content": [{"type": "text", "text": "go"}]}
    assert turns[1]["role"] == "assistant"
    assert turns[1]["content"] == (blocks or [{"type": "text", "text": EMPTY_TURN}])


@given(st.lists(st.tuples(st.text(min_size=1, max_size=8), text), min_size=1, max_size=4))
def test_tool_results_go_back_in_one_user_turn(results: list) -> None:
    calls = [
        {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}}
        for cid, _ in results
    ]
    transcript = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        *[
            {"role": "tool", "tool_call_id": cid, "name": "f", "content": out}
            for cid, out in results
        ],
        {"role": "user", "content": "You did not call a tool."},
    ]
    _, turns = to_anthropic(transcript)
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    answers = turns[2]["content"]
    assert [b["tool_use_id"] for b in answers[:-1]] == [cid for cid, _ in results]
    assert all(b["type"] == "tool_result" for b in answers[:-1])
    for block, (_, out) in zip(answers, results, strict=False):
        assert block.get("is_error", False) == out.startswith("Error:")
        assert block["content"] == (out or EMPTY_TURN)
    assert answers[-1] == {"type": "text", "text": "You did not call a tool."}


@given(names, objects, st.booleans())
def test_openai_tool_calls_parse_from_text_or_object_arguments(
    name: str, arguments: dict, as_text: bool
) -> None:
    raw = {
        "id": "call_9",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments) if as_text else arguments},
    }
    call = parse_tool_call(raw, "fallback")
    assert (call.id, call.name) == ("call_9", name)
    assert json.loads(call.arguments) == arguments


@given(st.text(max_size=40))
def test_malformed_argument_text_is_kept_for_the_env_to_reject(garbage: str) -> None:
    raw = {"function": {"name": "play_move", "arguments": garbage}}
    call = parse_tool_call(raw, "call_002_0")
    assert (call.id, call.arguments) == ("call_002_0", garbage)


def test_responses_without_choices_usage_or_content_are_empty_turns() -> None:
    assert parse_response({"choices": []}, TURN).tool_calls == ()
    reply = parse_response(
        {"choices": [{"message": {"content": None, "tool_calls": None}}], "usage": None}, TURN
    )
    assert (reply.content, reply.tool_calls, reply.usage.prompt_tokens) == ("", (), 0)


def test_tools_convert_to_input_schemas() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "play_move",
            "description": "d",
            "parameters": {"type": "object", "properties": {"action_id": {"type": "integer"}}},
        },
    }
    assert to_anthropic_tools([tool]) == [
        {
            "name": "play_move",
            "description": "d",
            "input_schema": {"type": "object", "properties": {"action_id": {"type": "integer"}}},
        }
    ]


# -- the runner's parse of a call's arguments (memoised for the calls a policy repeats) ------
@given(objects)
def test_arguments_parse_to_their_object_and_canonical_text_every_time(value: dict) -> None:
    from pytest_openenv.episode.loop import parse_arguments
    from pytest_openenv.util.memo import BoundedMemo

    raw = json.dumps(value, ensure_ascii=False, indent=1)
    seen: BoundedMemo = BoundedMemo(8)
    for _ in range(2):  # the second parse may come from the memo: same answer, own copy
        parsed, canonical = parse_arguments(raw, seen)
        assert parsed == value
        assert canonical == json.dumps(value, sort_keys=True, ensure_ascii=False)
        parsed["mutated"] = True  # a family changing what it got must not change the memo
    assert parse_arguments(raw) == (value, canonical)  # no memo: parsed afresh, same answer


def test_the_calls_a_policy_repeats_are_parsed_once_per_family() -> None:
    from pytest_openenv.envs.openspiel import OpenSpielFamily
    from pytest_openenv.episode.loop import EnvFactory, run_episode
    from pytest_openenv.episode.spec import EpisodeSpec
    from pytest_openenv.policies.scripted import ScriptedPolicy

    family = OpenSpielFamily("tic_tac_toe", {})
    for seed in range(3):
        run_episode(
            EpisodeSpec("openspiel:tic_tac_toe", seed, seed), EnvFactory(family), ScriptedPolicy()
        )
    # the scripted policy plays the first legal cell: a handful of texts, each kept once
    assert 1 <= len(family.argument_texts) <= 9
    assert family.argument_texts.get('{"action_id": 0}') == ({"action_id": 0}, '{"action_id": 0}')
    assert len(OpenSpielFamily("tic_tac_toe", {}).argument_texts) == 0  # another family's own


def test_arguments_that_are_not_json_text_are_refused_with_a_reason() -> None:
    import pytest

    from pytest_openenv.episode.loop import parse_arguments

    assert parse_arguments("[1, 2]") == ([1, 2], None)  # JSON, not an object: caller decides
    assert parse_arguments("  ") == ({}, "{}")
    with pytest.raises(ValueError, match="expected JSON text, got dict"):
        parse_arguments({"action_id": 1})
    with pytest.raises(ValueError):
        parse_arguments("{not json")
    with pytest.raises(RecursionError):
        parse_arguments("[" * 100_000 + "]" * 100_000)
