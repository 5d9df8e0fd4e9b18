"""User functions as policies: ``--openenv-policy=pkg.module:callable`` and the fixture."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from llm_helpers import ENV, all_rows, dist, errors

from pytest_openenv.config.settings import Settings
from pytest_openenv.envs.base import ProposedCall
from pytest_openenv.policies.base import Reply, ToolCall
from pytest_openenv.policies.callable import load_policy, to_reply
from pytest_openenv.policies.registry import build_policy

AGENTS = '''
import json

def center_first(messages, tools):
    """Plays 4 if it is legal, else the lowest legal action."""
    assert tools[0]["function"]["name"] == "play_move"
    legal = []
    for message in messages:
        for line in str(message.get("content") or "").splitlines():
            if line.startswith("Legal actions:"):
                legal = [int(x) for x in line.split(":")[1].split(",")]
    move = 4 if 4 in legal else legal[0]
    return {"name": "play_move", "arguments": {"action_id": move}}

def chatty(messages, tools, turn):
    """Text on the first turn (costs a turn), OpenAI-style tool calls after."""
    if turn.turn == 1:
        return "let me think"
    call = {"type": "function", "function": {"name": "play_move",
            "arguments": json.dumps({"action_id": turn.legal[0].arguments["action_id"]})}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}

def broken(messages, tools):
    return 42

not_callable = 7
'''


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_a_module_callable_plays(run_pytest, pytester: pytest.Pytester, workers: int) -> None:
    pytester.makepyfile(my_agents=AGENTS)
    result = run_pytest(
        ENV,
        "--openenv-n=3",
        "--openenv-policy=my_agents:center_first",
        "--openenv-concurrency=2",
        *dist(workers),
    )
    assert result.ret in (0, 1), result.stdout.str()
    rows = all_rows(pytester)
    assert len(rows) == 3
    for row in rows.values():
        assert row["policy"] == "my_agents:center_first"
        first_call = row["messages"][2]["tool_calls"][0]["function"]
        assert json.loads(first_call["arguments"]) == {"action_id": 4}


@pytest.mark.slow
def test_a_callable_may_take_the_turn_and_answer_in_text(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(my_agents=AGENTS)
    result = run_pytest(ENV, "--openenv-n=2", "--openenv-policy=my_agents:chatty")
    assert result.ret in (0, 1), result.stdout.str()
    for row in all_rows(pytester).values():
        assert row["messages"][2] == {"role": "assistant", "content": "let me think"}
        assert "did not call a tool" in row["messages"][3]["content"]
        assert row["done"]


@pytest.mark.slow
def test_a_callable_returning_junk_is_an_item_error(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(my_agents=AGENTS)
    result = run_pytest(ENV, "--openenv-n=1", "--openenv-policy=my_agents:broken")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*TypeError*my_agents:broken returned 42*accepted*"])
    (row,) = all_rows(pytester).values()
    assert row["failure"]["outcome"] == "error"


@pytest.mark.slow
def test_a_bad_callable_spec_is_a_usage_error(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(my_agents=AGENTS)
    result = run_pytest(ENV, "--openenv-policy=my_agents:missing")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'my_agents' has no attribute 'missing'*"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module:f", "cannot import module 'no_such_module'"),
        ("my_agents:not_callable", "'not_callable' is a int, not a callable or Policy"),
        ("my_agents:", "is not pkg.module:callable"),
    ],
)
def test_bad_callable_specs_say_what_is_wrong(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, spec: str, message: str
) -> None:
    pytester.makepyfile(my_agents=AGENTS)
    monkeypatch.chdir(pytester.path)
    monkeypatch.syspath_prepend(str(pytester.path))
    with pytest.raises(pytest.UsageError, match=re.escape(message)):
        load_policy(spec)


def test_a_module_callable_loads_as_a_labelled_policy(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(my_agents=AGENTS)
    monkeypatch.syspath_prepend(str(pytester.path))
    policy = load_policy("my_agents:center_first")
    assert policy.name == "my_agents:center_first"
    with pytest.raises(pytest.UsageError, match="unknown; choose one of"):
        build_policy("nonsense", Settings.from_config(pytester.parseconfig()))


@pytest.mark.slow
def test_the_openenv_policy_fixture_may_return_a_plain_function(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pytest_openenv import ToolCall

        @pytest.fixture
        def openenv_policy():
            def last_legal(messages, tools, turn):
                return ToolCall(f"c{turn.turn}", "play_move",
                                turn.legal[-1].arguments_json())
            return last_legal
        """
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=3)
        def test_game(episode):
            assert episode.done
            assert episode.policy.endswith("last_legal")
        """
    )
    result = run_pytest("--openenv-concurrency=3")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*3 passed*"])
    for row in all_rows(pytester).values():
        assert row["messages"][2]["tool_calls"][0]["id"] == "c1"
        assert json.loads(row["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {
            "action_id": 8
        }
    assert errors(pytester) == {}


# -- what a callable may return ------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
argument_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)


@given(names, argument_objects)
def test_a_name_and_arguments_dict_is_one_tool_call(name: str, arguments: dict) -> None:
    reply = to_reply({"name": name, "arguments": arguments}, turn=3)
    (call,) = reply.tool_calls
    assert call.name == name and json.loads(call.arguments) == arguments
    assert call.id == "call_003_0"


@given(names, st.text(max_size=30))
def test_arguments_text_is_kept_raw_even_when_not_json(name: str, text: str) -> None:
    (call,) = to_reply({"name": name, "arguments": text}, turn=1).tool_calls
    assert call.arguments == text


@given(st.lists(st.tuples(names, argument_objects, st.text(min_size=1, max_size=6)), max_size=4))
@pytest.mark.slow
def test_openai_tool_calls_keep_order_and_ids(calls: list) -> None:
    openai_calls = [
        {"id": cid, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for n, a, cid in calls
    ]
    reply = to_reply({"role": "assistant", "content": "hi", "tool_calls": openai_calls}, turn=2)
    assert reply.content == "hi"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        (cid, n, a) for n, a, cid in calls
    ]
    assert to_reply(openai_calls, turn=2).tool_calls == reply.tool_calls


@given(st.text(max_size=40))
def test_text_and_none_are_turns_without_a_tool_call(text: str) -> None:
    assert to_reply(text, turn=1) == Reply(content=text)
    assert to_reply(None, turn=1) == Reply()


def test_tool_calls_replies_and_proposed_calls_pass_through() -> None:
    call = ToolCall("x", "play_move", '{"action_id": 1}')
    assert to_reply(call, turn=1).tool_calls == (call,)
    reply = Reply(content="c", tool_calls=(call,))
    assert to_reply(reply, turn=1) is reply
    proposed = to_reply(ProposedCall("play_move", {"action_id": 2}), turn=4).tool_calls[0]
    assert (proposed.id, json.loads(proposed.arguments)) == ("call_004_0", {"action_id": 2})


@pytest.mark.parametrize("junk", [42, 1.5, {"no": "name"}, [1, 2], {"tool_calls": "x"}, object()])
def test_anything_else_is_a_type_error_naming_the_accepted_shapes(junk: object) -> None:
    with pytest.raises(TypeError, match="accepted: a tool call"):
        to_reply(junk, turn=1)
