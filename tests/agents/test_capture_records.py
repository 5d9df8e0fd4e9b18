"""Which captured calls make the row's conversation, and what is summed over them."""

from __future__ import annotations

from pytest_openenv.agents.capture import CapturedCall, conversation, main_call, side_calls
from pytest_openenv.agents.capture.records import summed_usage

SYSTEM = {"role": "system", "content": "agent"}
USER = {"role": "user", "content": "task"}


def call_of(messages, answer: str, status: int = 200, usage=(10, 2)) -> CapturedCall:
    return CapturedCall(
        dialect="anthropic",
        request_messages=list(messages),
        tools=[{"type": "function", "function": {"name": f"t{len(messages)}"}}],
        response_message={"role": "assistant", "content": answer} if status == 200 else {},
        usage={"prompt_tokens": usage[0], "completion_tokens": usage[1]},
        status=status,
        error=None if status == 200 else "refused",
    )


def test_the_longest_answered_thread_is_the_conversation_and_side_calls_are_apart() -> None:
    first = call_of([SYSTEM, USER], "a1")
    title = call_of([{"role": "user", "content": "Title this: task"}], "Tic-tac-toe")
    second = call_of([SYSTEM, USER, first.response_message, USER], "a2")
    refused = call_of([SYSTEM, USER, first.response_message, USER, USER, USER], "", status=400)
    calls = [first, title, second, refused]

    assert main_call(calls) is second
    messages, tools = conversation(calls)
    assert messages == [
        SYSTEM,
        USER,
        {"role": "assistant", "content": "a1"},
        USER,
        second.response_message,
    ]
    assert tools == second.tools
    assert side_calls(calls) == [title]
    # every call's tokens were spent, side calls and refused ones included
    assert summed_usage(calls) == (40, 8)


def test_a_compacted_thread_keeps_the_longer_conversation_before_it() -> None:
    long = call_of([SYSTEM, USER, {"role": "assistant", "content": "a1"}, USER], "a2")
    compacted = call_of([SYSTEM, {"role": "user", "content": "summary"}], "a3")
    assert main_call([long, compacted]) is long


def test_on_a_tie_the_later_call_is_the_conversation() -> None:
    retry_a = call_of([SYSTEM, USER], "first try")
    retry_b = call_of([SYSTEM, USER], "second try")
    assert conversation([retry_a, retry_b])[0][-1]["content"] == "second try"
