"""``--openenv-chat-template``: rows that train as they look through a model's chat template.

Each run collects real episodes (embedded tic-tac-toe or reasoning_gym) with a local
tokenizer folder whose ``tokenizer_config.json`` holds a template of one family's
style (``chat_templates.py``; SmolLM2's is its real template). Before any episode the
check picks the argument form the template needs, or refuses the run naming the
template and what it does to a call; after the run it renders the first rows, and
metadata.json, the card and the terminal say what it found. The rows are then
rendered independently here, so a check that says "intact" wrongly fails the test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chat_templates import DEEPSEEK_V3, LLAMA31, QWEN3, QWEN25, smollm2_template, tokenizer_folder
from helpers import read_jsonl

from pytest_openenv.dataset.chat_template.render import Renderer
from pytest_openenv.dataset.chat_template.source import (
    ChatTemplate,
    TemplateNotFound,
    load_chat_template,
)
from pytest_openenv.dataset.chat_template.survival import row_problems

TTT = ("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=3")
STYLES = {"qwen2.5": QWEN25, "qwen3": QWEN3, "deepseek-v3": DEEPSEEK_V3, "llama-3.1": LLAMA31}


def folder_for(pytester: pytest.Pytester, style: str) -> Path:
    text = smollm2_template() if style == "smollm2" else STYLES[style]
    return tokenizer_folder(pytester.path / "models" / style, text, bos_token="<s>")


def outputs(pytester: pytest.Pytester) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    folder = pytester.path / "openenv-results"
    metadata = json.loads((folder / "metadata.json").read_text())
    return read_jsonl(folder / "results.jsonl"), metadata, (folder / "README.md").read_text()


def rendered(folder: Path, row: dict[str, Any]) -> str:
    return Renderer(load_chat_template(str(folder))).render(row["messages"], row["tools"])


@pytest.mark.parametrize(
    ("style", "form", "other_survives"),
    [
        ("qwen2.5", "object", False),  # tojson: a string is encoded twice
        ("llama-3.1", "object", False),
        ("deepseek-v3", "string", False),  # text concatenation: an object fails
        ("qwen3", "string", True),  # either: the default form is kept
    ],
)
@pytest.mark.slow
def test_the_check_chooses_the_form_the_template_needs(
    run_pytest, pytester: pytest.Pytester, style: str, form: str, other_survives: bool
) -> None:
    folder = folder_for(pytester, style)
    result = run_pytest(*TTT, f"--openenv-chat-template={folder}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows, metadata, card = outputs(pytester)
    check = metadata["chat_template"]
    assert check["tool_arguments"] == metadata["identity"]["tool_arguments"] == form
    assert check["chosen_by"] == "the template check"
    assert check["source"] == str(folder / "tokenizer_config.json")
    other = "string" if form == "object" else "object"
    assert check["sample"][form] == []
    assert (check["sample"][other] == []) is other_survives
    assert check["rows_checked"] == 3 and check["row_problems"] == []
    result.stdout.fnmatch_lines([f"*chat template {folder}: tool-call arguments as {form}s*"])
    assert f"the rows were checked against the chat template of `{folder}`" in card
    assert "the first 3 row(s) render with every tool call and tool result intact" in card
    assert f'model="{folder}"' in card  # the card's SFT snippet trains the checked model
    for row in rows:
        calls = [c for m in row["messages"] for c in m.get("tool_calls") or ()]
        arguments = calls[0]["function"]["arguments"]
        assert isinstance(arguments, dict if form == "object" else str)
        text = rendered(folder, row)
        # read back independently: each accepted call's object once, never its string
        for entry in row["tool_trace"]:
            assert json.dumps(entry["arguments"]) in text
            assert json.dumps(json.dumps(entry["arguments"])) not in text


@pytest.mark.slow
def test_a_template_that_drops_tool_calls_is_refused_before_any_episode(
    run_pytest, pytester: pytest.Pytester
) -> None:
    folder = folder_for(pytester, "smollm2")  # SmolLM2-135M-Instruct's real template
    result = run_pytest(*TTT, f"--openenv-chat-template={folder}")
    assert result.ret == 4
    message = result.stderr.str()
    assert f"--openenv-chat-template={folder}: rows would not train as they look" in message
    for form in ("string", "object"):
        assert (
            f"with --openenv-tool-arguments={form}, the call to play_move is missing: its "
            'arguments are not in the assistant turn, which renders as "<|im_start|>assistant'
            '\\n<|im_end|>\\n"'
        ) in message, message
    assert "Neither argument form survives this template" in message
    assert not (pytester.path / "openenv-results").exists()  # nothing ran, nothing written


@pytest.mark.parametrize(
    ("style", "given", "fix"),
    [
        ("qwen2.5", "string", "double-encoded"),
        ("deepseek-v3", "object", "TypeError: can only concatenate str"),
    ],
)
@pytest.mark.slow
def test_a_given_form_the_template_breaks_is_refused_naming_the_one_that_works(
    run_pytest, pytester: pytest.Pytester, style: str, given: str, fix: str
) -> None:
    folder = folder_for(pytester, style)
    result = run_pytest(
        *TTT, f"--openenv-chat-template={folder}", f"--openenv-tool-arguments={given}"
    )
    assert result.ret == 4
    other = "object" if given == "string" else "string"
    result.stderr.fnmatch_lines(
        [
            f"*with --openenv-tool-arguments={given}, *{fix}*--openenv-tool-arguments={other} "
            "renders every call and result intact: use it*"
        ]
    )


@pytest.mark.slow
def test_workers_build_rows_in_the_form_the_controller_chose(
    run_pytest, pytester: pytest.Pytester
) -> None:
    folder = folder_for(pytester, "qwen2.5")
    result = run_pytest(*TTT, f"--openenv-chat-template={folder}", "-n", "2")
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows, metadata, _ = outputs(pytester)
    assert metadata["chat_template"]["tool_arguments"] == "object"
    assert {
        type(c["function"]["arguments"])
        for r in rows
        for m in r["messages"]
        for c in m.get("tool_calls") or ()
    } == {dict}


@pytest.mark.slow
def test_reasoning_gym_answers_survive_too(run_pytest, pytester: pytest.Pytester) -> None:
    folder = folder_for(pytester, "qwen2.5")
    result = run_pytest(
        "--openenv-env=reasoning_gym:chain_sum",
        "--openenv-n=2",
        f"--openenv-chat-template={folder}",
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows, metadata, _ = outputs(pytester)
    assert metadata["chat_template"]["row_problems"] == [] and len(rows) == 2
    for row in rows:
        answer = row["tool_trace"][0]["arguments"]["answer"]
        assert f'"arguments": {{"answer": "{answer}"}}' in rendered(folder, row)


#: renders the first six messages only: a sample row (system, user, two calls and
#: results) fits, a real tic-tac-toe game (three moves or more) loses its later calls
FIRST_SIX = QWEN25.replace("{%- for message in messages %}", "{%- for message in messages[:6] %}")


@pytest.mark.slow
def test_the_rows_are_checked_after_the_run_and_a_problem_is_reported(
    run_pytest, pytester: pytest.Pytester
) -> None:
    folder = tokenizer_folder(pytester.path / "models" / "first-six", FIRST_SIX)
    result = run_pytest(*TTT, f"--openenv-chat-template={folder}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    _, metadata, card = outputs(pytester)
    check = metadata["chat_template"]
    assert check["sample"]["object"] == [] and check["rows_checked"] == 3
    assert any("the call to play_move is missing" in p for p in check["row_problems"])
    result.stdout.fnmatch_lines(
        [f"*WARNING: chat template {folder}*the call to play_move is missing*"]
    )
    assert "**not intact** in the first 3 row(s)" in card


MARKED = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=2)
def test_episode(episode):
    assert episode.passed
"""


@pytest.mark.slow
def test_without_a_run_env_only_the_rows_are_checked(run_pytest, pytester) -> None:
    pytester.makepyfile(test_marked=MARKED)
    folder = folder_for(pytester, "qwen2.5")
    result = run_pytest("test_marked.py", f"--openenv-chat-template={folder}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    _, metadata, card = outputs(pytester)
    check = metadata["chat_template"]
    # the form could not be chosen before the run: the default, double-encoded by Qwen2.5
    assert check["tool_arguments"] == "string" and check["sample"] == {}
    assert any("double-encoded" in problem for problem in check["row_problems"])
    assert "not checked before the run (no `--openenv-env`)" in card


# -- where templates come from ------------------------------------------------------------
def write_cache_entry(cache: Path, repo: str, files: dict[str, str]) -> None:
    """A model in the Hugging Face cache layout (models--owner--name/snapshots/<commit>)."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    snapshot = root / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text)


@pytest.mark.slow
def test_a_cached_model_id_is_read_from_the_hugging_face_cache(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = pytester.path / "hf-cache"
    named = [
        {"name": "default", "template": "{{ messages }}"},
        {"name": "tool_use", "template": QWEN25},
    ]
    write_cache_entry(
        cache, "acme/tiny-chat", {"tokenizer_config.json": json.dumps({"chat_template": named})}
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = run_pytest(*TTT, "--openenv-chat-template=acme/tiny-chat")
    assert result.ret == 0, result.stdout.str()[-3000:]
    _, metadata, _ = outputs(pytester)
    assert metadata["chat_template"]["tool_arguments"] == "object"  # the tool_use template
    assert metadata["chat_template"]["source"].startswith(str(cache))


@pytest.mark.slow
def test_a_model_that_is_not_cached_is_a_usage_error_naming_the_download(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(pytester.path / "empty-cache"))
    result = run_pytest(*TTT, "--openenv-chat-template=acme/not-here")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [
            "*acme/not-here is not a local folder and is not in the Hugging Face cache (the check "
            "never downloads)*hf download acme/not-here tokenizer_config.json*"
        ]
    )


def test_template_files_transformers_reads_are_found(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": {"content": "<B>"}}))
    with pytest.raises(TemplateNotFound, match="has no chat template"):
        load_chat_template(str(folder))
    (folder / "chat_template.jinja").write_text("{{ bos_token }}{{ messages[0].content }}")
    template = load_chat_template(str(folder))
    assert template.source == str(folder / "chat_template.jinja")
    assert Renderer(template).render([{"role": "user", "content": "hi"}], None) == "<B>hi"
    bare = tmp_path / "tool.jinja"
    bare.write_text(QWEN3)
    assert load_chat_template(str(bare)).text == QWEN3
    with pytest.raises(TemplateNotFound, match="neither a folder or file here nor"):
        load_chat_template("no such thing at all")


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        (  # arguments as XML-style parameters: every key and value there, intact
            "{% for m in messages %}{% for c in m.tool_calls or [] %}"
            "<function={{ c.function.name }}>"
            "{% for k, v in c.function.arguments.items() %}<parameter={{ k }}>{{ v }}</parameter>"
            "{% endfor %}{% endfor %}{% if m.role == 'tool' %}{{ m.content }}{% endif %}"
            "{% endfor %}",
            None,
        ),
        (  # the object printed as it is
            "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.name }}"
            "{{ c.function.arguments }}{% endfor %}{{ m.content }}{% endfor %}",
            "render as a Python dict, {'action_id': 4}, not as JSON",
        ),
        (  # tool results left out
            "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.name }}"
            "{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}",
            "the result of play_move is missing",
        ),
    ],
)
def test_what_counts_as_intact(template: str, problem: str | None) -> None:
    from pytest_openenv.episode.record import stable_row

    raw = {
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "play_move", "arguments": '{"action_id": 4}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "play_move", "content": "You played 4."},
        ],
        "tool_trace": [{"tool_name": "play_move", "arguments": {"action_id": 4}, "result": {}}],
        "tools": [],
    }
    renderer = Renderer(ChatTemplate("m", "m.jinja", template))
    problems = row_problems(renderer, stable_row(raw, "object"))
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0], problems


#: nested loops the sandbox allows (each range is under its 100,000 cap): hours of rendering
LOOPING = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
)


@pytest.mark.slow
def test_a_looping_chat_template_is_a_usage_error_within_its_render_bound(
    run_pytest, pytester: pytest.Pytester
) -> None:
    import time

    folder = tokenizer_folder(pytester.path / "models" / "loops", LOOPING)
    started = time.monotonic()
    result = run_pytest(*TTT, f"--openenv-chat-template={folder}", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    message = result.stderr.str()
    assert f"--openenv-chat-template={folder}" in message
    assert "did not finish rendering within 5s" in message and "loops" in message
    assert time.monotonic() - started < 60
    assert not (pytester.path / "openenv-results" / "results.jsonl").exists()
