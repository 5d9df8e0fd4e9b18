"""``--openenv-tool-arguments``: how the written ``messages`` carry tool-call arguments.

``string`` (the default) keeps OpenAI's wire format, a JSON string.
``object`` writes the parsed object instead, for chat templates that apply
``tojson`` to the arguments (Qwen2.5, Llama-3.1 as TRL ships them): given a string
they encode it a second time and the model trains on ``"{\\"action_id\\": 4}"``.
Episodes run end to end through the real ``openai`` SDK against the loopback
model server, on the embedded tic-tac-toe engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llm_helpers import (
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    llm_args,
    openai_server_fixture,  # noqa: F401 - fixture
    output,
    results,
)
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer
from test_dataset_loads import (
    assert_one_type_per_field,
    datasets_module,  # noqa: F401 - fixture
    datasets_offline,  # noqa: F401 - fixture
    load_json_rows,
    without_nulls,
)

from pytest_openenv.episode.record import stable_row

OBJECT = "--openenv-tool-arguments=object"
#: every episode passes, so every row is in results.jsonl (the dataset a trainer reads)
KEEP_ALL = "--openenv-min-reward=-1"

#: the tool-call part of Qwen2.5's template, rendered the way transformers renders templates
TOOL_CALL_TEMPLATE = """\
{%- for message in messages if message.tool_calls -%}
{%- for call in message.tool_calls -%}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{% endfor -%}
{%- endfor -%}"""


def tojson(value: Any) -> str:
    """transformers' ``tojson`` filter (jinja2's own escapes HTML characters)."""
    return json.dumps(value, ensure_ascii=False)


def render_tool_calls(messages: list[dict[str, Any]]) -> str:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = tojson
    return env.from_string(TOOL_CALL_TEMPLATE).render(messages=messages)


def rendered_calls(text: str) -> list[Any]:
    """Each ``<tool_call>`` block of a rendering, read back as the JSON a model would emit."""
    blocks = text.split("<tool_call>\n")[1:]
    return [json.loads(block.split("\n</tool_call>")[0]) for block in blocks]


def tool_calls(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [call for m in row["messages"] for call in m.get("tool_calls") or ()]


def calls_with_trace(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each row's tool calls paired with their ``tool_trace`` entries (one entry per call)."""
    pairs = []
    for row in rows:
        calls = tool_calls(row)
        assert calls and len(calls) == len(row["tool_trace"])
        pairs += zip(calls, row["tool_trace"], strict=True)
    return pairs


def assert_recorded_form(pytester: pytest.Pytester, form: str, *card_phrases: str) -> None:
    """metadata.json (identity and settings) and the card say which form the folder holds."""
    metadata = json.loads((output(pytester) / "metadata.json").read_text())
    assert metadata["identity"]["tool_arguments"] == form
    assert metadata["settings"]["tool_arguments"] == form
    card = (output(pytester) / "README.md").read_text()
    for phrase in card_phrases:
        assert phrase in card


def run_episodes(run_pytest, server: OpenAICompatServer, *extra: str, n: int = 3) -> Any:
    result = run_pytest(*llm_args(server, KEEP_ALL, *extra, n=n))
    assert result.ret == 0, result.stdout.str()[-3000:]
    return result


def test_default_writes_arguments_as_json_strings(
    run_pytest, pytester: pytest.Pytester, openai_server: OpenAICompatServer
) -> None:
    run_episodes(run_pytest, openai_server)
    rows = results(pytester)
    assert len(rows) == 3
    for call, entry in calls_with_trace(rows):
        text = call["function"]["arguments"]
        assert isinstance(text, str)  # the contract: OpenAI's wire format
        assert json.loads(text) == entry["arguments"]
        assert text == entry["arguments_text"]
    assert_recorded_form(
        pytester,
        "string",
        "tool-call arguments in `messages`: `string`, a JSON string",
        ".arguments` as a JSON string)",
    )


@pytest.mark.slow
def test_object_mode_writes_the_parsed_objects_and_loads_with_datasets(
    run_pytest,
    pytester: pytest.Pytester,
    openai_server: OpenAICompatServer,
    datasets_offline: Path,  # noqa: F811 - fixture
) -> None:
    run_episodes(run_pytest, openai_server, OBJECT, "-n", "2")
    rows = results(pytester)
    assert len(rows) == 3
    for call, entry in calls_with_trace(rows):
        assert isinstance(call["function"]["arguments"], dict)
        assert call["function"]["arguments"] == entry["arguments"]
        assert json.loads(entry["arguments_text"]) == entry["arguments"]
    assert_one_type_per_field(rows)
    loaded = load_json_rows(output(pytester) / "results.jsonl", datasets_offline)
    assert [without_nulls(row["messages"]) for row in loaded] == [r["messages"] for r in rows]
    # only the files change: the model still got OpenAI's wire format, JSON strings
    sent = [
        call["function"]["arguments"]
        for body in openai_server.bodies
        for message in body["messages"]
        for call in message.get("tool_calls") or ()
    ]
    assert sent and all(isinstance(text, str) for text in sent)
    assert_recorded_form(
        pytester,
        "object",
        "tool-call arguments in `messages`: `object`, objects",
        ".arguments` as an object: the accepted call's arguments",
    )


@pytest.mark.slow
def test_object_mode_writes_null_for_a_refused_call_and_still_loads(
    run_pytest,
    pytester: pytest.Pytester,
    datasets_offline: Path,  # noqa: F811 - fixture
) -> None:
    # turn 1 sends {"action_id": "four"}: JSON, but a string where every accepted call
    # has an integer; written as an object it would give the field two types
    server = OpenAICompatServer(Faults(turn_faults={1: "wrong_type"})).start()
    try:
        run_episodes(run_pytest, server, OBJECT, n=2)
    finally:
        server.stop()
    rows = results(pytester)
    assert len(rows) == 2
    for row in rows:
        refused = tool_calls(row)[0]["function"]
        assert refused["arguments"] is None
        assert row["tool_trace"][0]["arguments"] is None
        assert row["tool_trace"][0]["arguments_text"] == '{"action_id": "four"}'  # kept
        assert row["tool_trace"][0]["result"]["error"]
        later = [call["function"]["arguments"] for call in tool_calls(row)[1:]]
        assert later and all(isinstance(arguments, dict) for arguments in later)
    assert_one_type_per_field(rows)
    assert len(load_json_rows(output(pytester) / "results.jsonl", datasets_offline)) == 2


@pytest.mark.slow
def test_a_tojson_chat_template_encodes_strings_twice_and_objects_once(
    run_pytest, pytester: pytest.Pytester, openai_server: OpenAICompatServer
) -> None:
    rendered = {}
    for form in ("string", "object"):
        run_episodes(run_pytest, openai_server, f"--openenv-tool-arguments={form}", n=1)
        row = results(pytester)[0]
        rendered[form] = render_tool_calls(row["messages"])
        trace = [entry["arguments"] for entry in row["tool_trace"]]
        calls = rendered_calls(rendered[form])
        assert len(calls) == len(trace) > 1
        if form == "object":  # what the model should learn to emit: the object
            assert [call["arguments"] for call in calls] == trace
        else:  # a string inside the JSON: the model would learn to quote its arguments
            assert [json.loads(call["arguments"]) for call in calls] == trace
    # the first move of the loopback model is the first legal action, 0
    assert '"arguments": {"action_id": 0}}' in rendered["object"]
    assert '"arguments": "{\\"action_id\\": 0}"}' in rendered["string"]
    assert '\\"' not in rendered["object"]


@pytest.mark.slow
def test_resume_in_the_other_form_is_refused(
    run_pytest, pytester: pytest.Pytester, openai_server: OpenAICompatServer
) -> None:
    run_episodes(run_pytest, openai_server, OBJECT, n=2)
    before = (output(pytester) / "results.jsonl").read_bytes()
    resumed = run_pytest(*llm_args(openai_server, KEEP_ALL, "--openenv-resume", n=3))
    assert resumed.ret == 4, resumed.stdout.str()[-3000:]
    resumed.stderr.fnmatch_lines(
        [
            '*written by a run with tool_arguments="object", this run has '
            'tool_arguments="string" (--openenv-tool-arguments)*'
        ]
    )
    assert (output(pytester) / "results.jsonl").read_bytes() == before
    same = run_pytest(*llm_args(openai_server, KEEP_ALL, OBJECT, "--openenv-resume", n=3))
    assert same.ret == 0, same.stdout.str()[-3000:]
    assert len(results(pytester)) == 3


@pytest.mark.slow
def test_a_folder_written_before_the_option_holds_strings(
    run_pytest, pytester: pytest.Pytester, openai_server: OpenAICompatServer
) -> None:
    run_episodes(run_pytest, openai_server, n=2)
    path = output(pytester) / "metadata.json"
    metadata = json.loads(path.read_text())
    del metadata["identity"]["tool_arguments"]  # as an earlier version wrote it
    del metadata["settings"]["tool_arguments"]
    path.write_text(json.dumps(metadata))
    resumed = run_pytest(*llm_args(openai_server, KEEP_ALL, OBJECT, "--openenv-resume", n=3))
    assert resumed.ret == 4, resumed.stdout.str()[-3000:]
    resumed.stderr.fnmatch_lines(
        ['*tool_arguments="string", this run has tool_arguments="object"*']
    )


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_an_unknown_form_is_a_usage_error_naming_the_choices(
    run_pytest, pytester: pytest.Pytester, where: str
) -> None:
    args = ["--openenv-env=openspiel:tic_tac_toe", "--openenv-n=1"]
    if where == "cli":
        args.append("--openenv-tool-arguments=json")
    else:
        pytester.makeini("[pytest]\nopenenv_tool_arguments = json\n")
    result = run_pytest(*args)
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*--openenv-tool-arguments='json' is invalid: expected one of string, object*"]
    )
    assert not output(pytester).exists()  # refused before any episode


def test_calls_without_their_trace_entries_have_their_text_parsed() -> None:
    # a row not made by the runner: the trace does not line up with the calls
    calls = [
        {"id": "a", "function": {"name": "f", "arguments": '{"x": 1, "y": {}}'}},
        {"id": "b", "function": {"name": "f", "arguments": "[1, 2]"}},
        {"id": "c", "function": {"name": "f", "arguments": '{"x": '}},
        {"id": "d", "function": {"name": "f", "arguments": {"x": 2}}},
    ]
    row = {"messages": [{"role": "assistant", "content": "", "tool_calls": calls}]}
    written = stable_row(row, "object")["messages"][0]["tool_calls"]
    assert [call["function"]["arguments"] for call in written] == [{"x": 1}, None, None, {"x": 2}]
    strings = stable_row(row)["messages"][0]["tool_calls"]
    assert [call["function"]["arguments"] for call in strings][:3] == [
        '{"x": 1, "y": {}}',
        "[1, 2]",
        '{"x": ',
    ]
    with pytest.raises(ValueError, match="expected one of"):
        stable_row(row, "dict")
