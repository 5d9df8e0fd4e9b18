"""Data that loads everywhere: every built-in family's files load with ``datasets`` (as JSON
files and through the card's configs), every field keeps one JSON type across rows, and
``messages``/``tools`` are the OpenAI chat format TRL's SFTTrainer takes."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers.openenv_servers import serve_in_thread

from pytest_openenv.envs.registry import installed_families
from pytest_openenv.episode.result import Episode, dumps_record
from pytest_openenv.policies.base import Usage

#: one sample run per built-in family: env spec, and the test server it needs (if any)
FAMILY_RUNS: dict[str, tuple[str, str | None]] = {
    "openspiel": ("openspiel:tic_tac_toe", None),
    "reasoning_gym": ("reasoning_gym:chain_sum", None),
    "openenv": ("openenv:echo", "echo"),
}
BUILTIN = sorted(
    name
    for name, entry_point in installed_families().items()
    if entry_point.value.startswith("pytest_openenv.")
)

ODD_PROMPT = (
    "Play \"well\" and say 'hi'\n---\nlicense: evil\n---\n```\n| a | b |\n"
    "<!-- x --> 😀 ünï \u2028 \\ end"
)

#: Per seed: 0 plays the family's scripted move (or echoes the target), 1 first answers
#: without a tool call, 2 sends broken JSON arguments every turn (tool errors, never
#: finishes), 3 hits a policy outage (an errored episode: a placeholder row).
MIXED_POLICY_TEST = """
import json
import re

import pytest

from pytest_openenv import Policy, Reply, ToolCall
from pytest_openenv.policies.base import PolicyUnavailable


class Mixed(Policy):
    name = "mixed"
    model = "mixed-model \\"v1\\""

    def act(self, turn):
        kind = turn.seed % 4
        tool = turn.tools[0]["function"]["name"]
        call_id = f"call_{turn.turn}"
        if kind == 3:
            raise PolicyUnavailable(f"stand-in outage for seed {turn.seed}")
        if kind == 2:
            bad = ToolCall(call_id, tool, "{not json")
            return Reply(content='thinking "hard"\\n---\\n', tool_calls=(bad,))
        if kind == 1 and turn.turn == 1:
            return Reply(content="no tool this time ✓")
        if turn.scripted is not None:
            return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, call_id),))
        target = re.search(r'"target": "([^"]*)"', turn.messages[1]["content"]).group(1)
        arguments = json.dumps({"message": target})
        return Reply(tool_calls=(ToolCall(call_id, tool, arguments),))


@pytest.fixture
def openenv_policy():
    return Mixed()


def test_episode(episode):
    assert episode.passed, episode.explain()
"""


# -- checks -------------------------------------------------------------------------------
def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole lines only, split at newline bytes as JSONL readers do."""
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path} does not end with a newline"
    return [json.loads(line) for line in raw.split(b"\n") if line.strip()]


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    return {float: "float", str: "string", list: "array", dict: "object"}[type(value)]


def field_types(rows: list[dict[str, Any]]) -> dict[str, set[str]]:
    """JSON types seen at each field path (``messages[].content``), nulls left out."""
    types: dict[str, set[str]] = defaultdict(set)

    def walk(value: Any, path: str) -> None:
        if value is None:
            return
        types[path].add(json_type(value))
        if isinstance(value, dict):
            assert value, f"empty object at {path}: pyarrow cannot store a struct with no fields"
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for item in value:
                walk(item, f"{path}[]")

    for row in rows:
        walk(row, "")
    return types


def assert_one_type_per_field(rows: list[dict[str, Any]]) -> None:
    mixed = {path: kinds for path, kinds in field_types(rows).items() if len(kinds) > 1}
    assert not mixed, f"fields with more than one type across rows: {mixed}"


def assert_openai_chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    """The chat format TRL's SFTTrainer passes to ``apply_chat_template(messages, tools=)``."""
    names = set()
    for spec in tools:
        assert spec["type"] == "function"
        function = spec["function"]
        assert isinstance(function["name"], str) and isinstance(function["description"], str)
        assert function["parameters"]["type"] == "object"
        names.add(function["name"])
    if not messages:
        return  # an errored episode's placeholder row
    assert messages[0]["role"] == "system"
    open_calls: set[str] = set()
    for message in messages:
        assert message["role"] in ("system", "user", "assistant", "tool")
        assert isinstance(message["content"], str)
        if message["role"] == "assistant":
            for call in message.get("tool_calls") or []:
                assert call["type"] == "function" and call["id"]
                assert call["function"]["name"] in names
                assert isinstance(call["function"]["arguments"], str)  # OpenAI: a JSON string
                open_calls.add(call["id"])
        else:
            assert not message.get("tool_calls")
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
        else:
            assert message.get("tool_call_id") is None


def without_nulls(value: Any) -> Any:
    """What a loaded row holds once the keys ``datasets`` fills with None are dropped."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


@pytest.fixture(scope="session")
def datasets_module() -> Any:
    """``datasets``, imported once per process and offline.

    Session scope: imported before pytester snapshots ``sys.modules``, so pytester's
    restore does not make the next test import it again (pyarrow would refuse to
    register datasets' extension types twice).
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_DATASETS_OFFLINE", "1")  # read by datasets at import
        import datasets

    datasets.disable_progress_bars()
    return datasets


@pytest.fixture
def datasets_offline(
    datasets_module: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Path]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    yield tmp_path / "datasets-cache"


def load_json_rows(path: Path, cache: Path) -> list[dict[str, Any]]:
    import datasets

    loaded = datasets.load_dataset("json", data_files=str(path), split="train", cache_dir=cache)
    return list(loaded)


def assert_loads_losslessly(path: Path, cache: Path) -> list[dict[str, Any]]:
    lines = read_jsonl(path)
    loaded = load_json_rows(path, cache)
    assert len(loaded) == len(lines) == path.read_bytes().count(b"\n")
    for raw, row in zip(lines, loaded, strict=True):
        assert without_nulls(row["messages"]) == raw["messages"]
        assert without_nulls(row["tools"]) == without_nulls(raw["tools"])
        assert row["episode_id"] == raw["episode_id"] and row["reward"] == raw["reward"]
    return loaded


# -- every built-in family, end to end ------------------------------------------------------
def test_every_builtin_family_has_a_sample_run() -> None:
    assert {"openspiel", "reasoning_gym", "openenv"} <= set(BUILTIN)
    assert set(BUILTIN) <= set(FAMILY_RUNS), "add a sample run for the new built-in family"


@pytest.mark.parametrize("family", BUILTIN)
@pytest.mark.slow
def test_files_of_every_family_load_with_datasets(
    family: str, run_pytest, pytester: pytest.Pytester, datasets_offline: Path
) -> None:
    env, server_kind = FAMILY_RUNS[family]
    pytester.makepyfile(test_mixed=MIXED_POLICY_TEST)
    args = [
        "test_mixed.py",
        f"--openenv-env={env}",
        "--openenv-n=8",
        "--openenv-max-turns=3",
        "--openenv-output=out",
        f"--openenv-system-prompt={ODD_PROMPT}",
    ]
    server = serve_in_thread(server_kind) if server_kind else None
    try:
        if server is not None:
            args.append(f"--openenv-server={server.url}")
        result = run_pytest(*args)
    finally:
        if server is not None:
            server.stop()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    folder = pytester.path / "out"
    results, failures = read_jsonl(folder / "results.jsonl"), read_jsonl(folder / "failures.jsonl")
    assert results, "seed 0 and 4 play the scripted/target move and pass"
    outcomes = {row["failure"]["outcome"] for row in failures}
    assert outcomes == {"failed", "error"}, outcomes  # losses/tool errors and placeholders
    assert len(results) + len(failures) == 8

    for rows in (results, failures):
        assert_one_type_per_field(rows)
        for row in rows:
            if row["messages"]:
                assert row["messages"][0]["content"] == ODD_PROMPT
    # tool_trace: the accepted call's arguments as an object (as `openenv collect` writes
    # them), a refused one's as null, and the policy's text for both
    traces = [entry for row in results + failures for entry in row["tool_trace"]]
    assert any(isinstance(entry["arguments"], dict) for entry in traces)
    broken = [entry for entry in traces if entry["arguments_text"] == "{not json"]
    assert broken and all(entry["arguments"] is None for entry in broken)
    cache = datasets_offline
    for path in (folder / "results.jsonl", folder / "failures.jsonl"):
        raw_rows = read_jsonl(path)
        for raw, row in zip(raw_rows, assert_loads_losslessly(path, cache), strict=True):
            assert_openai_chat(without_nulls(row["messages"]), without_nulls(row["tools"]))
            assert without_nulls(row["tool_trace"]) == without_nulls(raw["tool_trace"])

    # the card's configs point datasets (and the Hub viewer) at the right files
    import datasets

    default = datasets.load_dataset(str(folder), split="train", cache_dir=cache)
    assert sorted(default["episode_id"]) == sorted(row["episode_id"] for row in results)
    failed = datasets.load_dataset(str(folder), "failures", split="train", cache_dir=cache)
    assert len(failed) == len(failures) and "failure" in failed.column_names


# -- odd strings in every user-supplied place -------------------------------------------------
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
odd_text = st.lists(
    st.one_of(
        st.sampled_from(['"', "'", "\n", "\r\n", "---", "```", "|", "\\", "😀", "\u2028", "{}"]),
        st.text(CHARS, max_size=6),
    ),
    max_size=8,
).map("".join)
odd_config = st.dictionaries(
    odd_text, st.one_of(odd_text, st.integers(), st.lists(odd_text, max_size=2)), max_size=3
)


@st.composite
def odd_episodes(draw: st.DrawFn) -> Episode:
    index = draw(st.integers(0, 999))
    prompt, task_text, observation = draw(odd_text), draw(odd_text), draw(odd_text)
    arguments = json.dumps({"answer": draw(odd_text)}, ensure_ascii=draw(st.booleans()))
    passed = draw(st.booleans())
    messages = [
        {"role": "system", "content": prompt},
        {"role": "user", "content": task_text},
        {
            "role": "assistant",
            "content": draw(odd_text),
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "answer", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "answer", "content": observation},
    ]
    return Episode(
        episode_id=f"ep-{index:06d}",
        seed=index,
        env=f"reasoning_gym:{draw(odd_text)}",
        reward=float(passed),
        passed=passed,
        done=True,
        turns=1,
        outcome="correct" if passed else "wrong",
        min_reward=1.0,
        messages=messages,
        tool_trace=[
            {
                "tool_name": "answer",
                "arguments": arguments,
                "result": {
                    "data": observation,
                    "done": True,
                    "reward": float(passed),
                    "error": None,
                },
            }
        ],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": "answer",
                    "description": draw(odd_text),
                    "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}},
                },
            }
        ],
        usage=Usage(),
        metrics={"turns": 1, "tool_calls": 1, "tool_errors": 0, "wall_time_s": 0.5},
        task={
            "family": "reasoning_gym",
            "variant": "x",
            "config": json.dumps(draw(odd_config), sort_keys=True, ensure_ascii=False),
            "prompt": task_text,
            "answer": draw(st.one_of(st.none(), odd_text, st.integers())),
        },
        policy=draw(odd_text),
        model=draw(st.one_of(st.none(), odd_text)),
        reason=None if passed else draw(odd_text),
        final_observation=observation,
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes=st.lists(odd_episodes(), min_size=1, max_size=5))
def test_odd_strings_keep_the_jsonl_whole_typed_and_loadable(
    episodes: list[Episode], tmp_path_factory: pytest.TempPathFactory, datasets_module: Any
) -> None:
    folder = tmp_path_factory.mktemp("odd")
    records = [episode.record(test=f"t::test[{episode.episode_id}]") for episode in episodes]
    lines = [dumps_record(record) for record in records]
    # one row, one line, for every line reader (str.splitlines also splits at U+2028, U+0085)
    assert all(len(line.splitlines()) == 1 for line in lines)
    path = folder / "results.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert [json.loads(line) for line in lines] == records
    assert_one_type_per_field(records)
    for record in records:
        assert isinstance(record["task"]["answer"], (str, type(None)))  # never a bare number
    loaded = datasets_module.load_dataset(
        "json", data_files=str(path), split="train", cache_dir=str(folder / "cache")
    )
    assert len(loaded) == len(records)
    assert [without_nulls(row["messages"]) for row in loaded] == [r["messages"] for r in records]


def test_stable_row_gives_each_field_its_one_type() -> None:
    from pytest_openenv.episode.record import stable_row

    row = stable_row(
        {
            "episode_id": "ep-000000",
            "messages": [
                {"role": "system", "content": None},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": 7, "function": {"name": "f", "arguments": {"x": 1}}}],
                    "reasoning_content": "because",
                },
                {"role": "tool", "tool_call_id": 7, "name": "f", "content": {"ok": True}},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {"name": "f", "parameters": {"type": "object", "properties": {}}},
                }
            ],
            "tool_trace": [
                {"tool_name": "f", "arguments": {"x": 1}, "result": {"data": 3, "reward": 1}}
            ],
            "reward": 1,
            "task": {"prompt": "p", "answer": 42, "metadata": {"difficulty": 2}},
            "metrics": {"turns": 1, "per_turn": [1, 2]},
            "verify_metrics": {"outcome": "win"},
            "artifacts": {},
            "extra": {"server": None, "labels": {"a": 1}},
            "model": None,
        }
    )
    assert row["messages"] == [
        {"role": "system", "content": ""},
        {"role": "user", "content": "ab"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "7", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
            ],
            "reasoning_content": "because",
        },
        {"role": "tool", "content": '{"ok": true}', "tool_call_id": "7", "name": "f"},
    ]
    assert row["tools"][0]["function"] == {
        "name": "f",
        "description": "",
        "parameters": {"type": "object"},
    }
    assert row["tool_trace"][0] == {
        "tool_name": "f",
        "arguments": {"x": 1},
        "arguments_text": '{"x": 1}',
        "result": {
            "data": "3",
            "done": False,
            "reward": 1.0,
            "error": None,
            "metadata": {"reward": 1.0},
        },
    }
    assert row["reward"] == 1.0 and isinstance(row["reward"], float)
    assert row["task"] == {"prompt": "p", "answer": "42", "metadata": '{"difficulty": 2}'}
    assert row["metrics"] == {"turns": 1, "per_turn": "[1, 2]"}
    assert row["extra"] == {"server": None, "labels": '{"a": 1}'}
    assert row["model"] is None


odd_text = st.text(max_size=12)


@given(
    role=odd_text,
    content=st.one_of(odd_text, st.none(), st.integers(), st.lists(odd_text, max_size=2)),
    call_id=st.one_of(st.none(), odd_text, st.integers()),
    name=st.one_of(st.none(), odd_text),
)
def test_chat_messages_take_one_shape_whichever_path_builds_them(
    role: str, content: Any, call_id: Any, name: Any
) -> None:
    from pytest_openenv.episode.record import as_text, chat_message, message_content

    message: dict[str, Any] = {"role": role, "content": content}
    if call_id is not None:
        message["tool_call_id"] = call_id
    if name is not None:
        message["name"] = name
    out = chat_message(message)
    expected_keys = ["role", "content"]
    expected_keys += ["tool_call_id"] if call_id is not None else []
    expected_keys += ["name"] if name is not None else []
    assert list(out) == expected_keys  # one key order for every row
    assert all(isinstance(value, str) for value in out.values())
    assert out["content"] == message_content(content) and out["role"] == role
    if call_id is not None:
        assert out["tool_call_id"] == as_text(call_id)
    assert out is not message
