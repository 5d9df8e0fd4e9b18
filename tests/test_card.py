"""The dataset card: its YAML front-matter and Markdown survive whatever users type.

The front-matter is read with huggingface_hub's own card parser (what the Hub
client uses), the Markdown with markdown-it (CommonMark + GFM tables).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from huggingface_hub import DatasetCard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pytest_openenv.dataset.card import GENERATED_MARKER, build_card
from pytest_openenv.util.secrets import withhold_config

FRAGMENTS = [
    '"',
    "'",
    "\n",
    "\r\n",
    "\r",
    "---",
    "\n---\n",
    "---\nlicense: evil\n---\n",
    "```",
    "````",
    "\n```\n",
    "\n````\n",
    "\n~~~\n",
    "~~~",
    "`",
    "|",
    "\\|",
    "<!--",
    "-->",
    "<script>alert(1)</script>",
    "# heading",
    "\n## Figures\n",
    "- item",
    ": ",
    "key: value",
    "{{ x }}",
    "%",
    "&amp;",
    "\\",
    "\t",
    "\u2028",
    "\x85",
    "\ufeff",
    "😀",
    "ünïcødé",
    "中文",
    "*",
    "_",
    "[x](http://example.com)",
    "\x1b[31m",
    "!",
    "#",
    "@",
]
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
odd_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(CHARS, max_size=6)), max_size=10
).map("".join)
odd_config = st.dictionaries(
    odd_text,
    st.one_of(odd_text, st.integers(), st.lists(odd_text, max_size=3), st.none()),
    max_size=4,
)
HEADINGS = ["Figures", "Files", "Loading", "Schema", "Run configuration"]
FIGURE_ROWS = 9


def summary_and_metadata(
    *, env: str, policy: str, model: str | None, config: dict[str, Any], prompt: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    figures = {
        "episodes": 7,
        "ran": 7,
        "passed": 4,
        "failed": 2,
        "errored": 1,
        "skipped": 0,
        "pass_rate": 4 / 7,
        "pass_rate_ci95": [0.25, 0.84],
        "mean_reward": 0.1,
        "mean_reward_stderr": 0.3,
        "mean_turns": 3.0,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "envs": [env],
        "policies": [policy],
        "models": [model] if model else [],
    }
    settings = {
        "env": env,
        "n": 7,
        "seed": 3,
        "env_config": config,
        "policy": policy,
        "system_prompt": prompt,
        "max_turns": 10,
        "min_reward": None,
    }
    metadata = {"settings": settings, "version": "0.1.0", "started_at": "t0", "finished_at": "t1"}
    return {"figures": figures}, metadata


def markdown_tokens(text: str) -> list[Any]:
    return MarkdownIt("commonmark").enable("table").parse(text)


def heading_texts(tokens: list[Any], tag: str) -> list[str]:
    return [
        tokens[i + 1].content
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.tag == tag
    ]


def table_shapes(tokens: list[Any]) -> list[list[int]]:
    """Per table, the number of cells of each body row."""
    shapes: list[list[int]] = []
    in_body = False
    for token in tokens:
        if token.type == "table_open":
            shapes.append([])
        elif token.type == "tbody_open":
            in_body = True
        elif token.type == "tbody_close":
            in_body = False
        elif token.type == "tr_open" and in_body:
            shapes[-1].append(0)
        elif token.type == "td_open" and in_body:
            shapes[-1][-1] += 1
    return shapes


def check_card(text: str, *, prompt: str | None, config: dict[str, Any], env: str) -> None:
    card = DatasetCard(text)
    assert card.data.configs == [
        {
            "config_name": "default",
            "data_files": [{"split": "train", "path": "results.jsonl"}],
            "default": True,
        },
        {"config_name": "failures", "data_files": [{"split": "train", "path": "failures.jsonl"}]},
    ]
    assert card.data.license == "apache-2.0"
    assert card.data.pretty_name == f"{env} agent episodes"
    assert card.data.tags[:3] == ["openenv", "pytest-openenv", "openspiel"]

    tokens = markdown_tokens(card.text)
    assert heading_texts(tokens, "h2") == HEADINGS
    assert len(heading_texts(tokens, "h1")) == 1
    shapes = table_shapes(tokens)
    assert shapes[0] == [2] * FIGURE_ROWS  # figures: no user value split or ended a row
    assert shapes[1] == [4] * 5  # files (report.html among them)
    assert all(cells == 3 for cells in shapes[2])  # schema
    fences = [t.content for t in tokens if t.type == "fence"]
    # a credential's value (under a key naming one) is withheld, its key named
    shown = withhold_config(config)
    expected_config = json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=True)
    assert expected_config.replace("\r\n", "\n").replace("\r", "\n") + "\n" in fences
    if prompt:
        assert prompt.replace("\r\n", "\n").replace("\r", "\n") + "\n" in fences
    html = [t.content.strip() for t in tokens if t.type in ("html_block", "html_inline")]
    assert html == [GENERATED_MARKER]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    variant=odd_text,
    policy=odd_text,
    model=st.one_of(st.none(), odd_text),
    config=odd_config,
    prompt=st.one_of(st.none(), odd_text),
)
@pytest.mark.slow
def test_odd_user_values_break_neither_yaml_nor_markdown(
    variant: str, policy: str, model: str | None, config: dict[str, Any], prompt: str | None
) -> None:
    env = f"openspiel:{variant}"
    summary, metadata = summary_and_metadata(
        env=env, policy=policy, model=model, config=config, prompt=prompt
    )
    text = build_card(
        summary,
        metadata,
        rows={"results.jsonl": 4, "failures.jsonl": 3},
        repo_id="alice/odd-run",
        license="apache-2.0",
    )
    check_card(text, prompt=prompt, config=config, env=env)


def test_configs_follow_which_files_have_rows() -> None:
    summary, metadata = summary_and_metadata(
        env="openspiel:tic_tac_toe", policy="random", model=None, config={}, prompt=None
    )
    only_results = DatasetCard(
        build_card(summary, metadata, rows={"results.jsonl": 5, "failures.jsonl": 0})
    )
    assert [c["config_name"] for c in only_results.data.configs] == ["default"]
    assert only_results.data.license is None  # none given, none claimed
    # nothing passed: the failures are what there is to look at (an empty file cannot load),
    # but never as split "train" of the default config (a fine-tuning script would take them)
    only_failures = DatasetCard(
        build_card(summary, metadata, rows={"results.jsonl": 0, "failures.jsonl": 5})
    )
    assert only_failures.data.configs == [
        {
            "config_name": "default",
            "data_files": [{"split": "failures", "path": "failures.jsonl"}],
            "default": True,
        },
        {"config_name": "failures", "data_files": [{"split": "train", "path": "failures.jsonl"}]},
    ]


def test_card_states_the_run_figures() -> None:
    summary, metadata = summary_and_metadata(
        env="reasoning_gym:chain_sum",
        policy="openai",
        model="gpt-x",
        config={"size": 5},
        prompt="Answer briefly.",
    )
    text = build_card(summary, metadata, rows={"results.jsonl": 4, "failures.jsonl": 3})
    assert "| episodes | 7 (4 passed, 2 failed, 1 errored, 0 skipped) |" in text
    assert "| pass rate | 57.1% (95% Wilson interval 25.0% - 84.0%, n=7) |" in text
    assert "| mean reward | 0.100 ± 0.300 (s.e.) |" in text
    assert "| policy | `openai` |" in text and "| model | `gpt-x` |" in text
    assert "| seed | `3` (episode *i* uses seed 3 + *i*) |" in text
    assert "from trl import SFTConfig, SFTTrainer" in text
    assert 'load_dataset("json", data_files="results.jsonl", split="train")' in text
    assert DatasetCard(text).data.tags == [
        "openenv",
        "pytest-openenv",
        "reasoning-gym",
        "agent-trajectories",
        "tool-calling",
        "synthetic",
    ]


def test_card_names_the_env_config_credentials_it_withholds_never_their_values() -> None:
    token = "hf_CARDtokenQ7f3a9c2e41"
    config = {
        "hf_token": token,
        "auth": {"apiKey": "abc", "region": "eu"},
        "max_tokens": 512,  # a count, not a credential
        "tokenizer": "gpt2",
    }
    summary, metadata = summary_and_metadata(
        env="openenv:repl_env", policy="random", model=None, config=config, prompt=None
    )
    text = build_card(summary, metadata, rows={"results.jsonl": 4, "failures.jsonl": 3})
    assert token not in text and '"abc"' not in text
    assert "Withheld: the value of `hf_token`, `auth.apiKey` (a credential" in text
    assert '"max_tokens": 512' in text and '"tokenizer": "gpt2"' in text
    assert '"region": "eu"' in text


def test_front_matter_is_huggingface_hubs_and_reads_back_even_with_a_nel() -> None:
    from huggingface_hub import DatasetCardData

    from pytest_openenv.dataset.card import front_matter, front_matter_text

    data = front_matter(envs=["openspiel:tic_tac_toe"], rows={"results.jsonl": 2}, license="mit")
    assert isinstance(data, DatasetCardData)
    assert front_matter_text(data) == data.to_yaml()  # the library's text, as it writes it
    # PyYAML (6.0) writes U+0085 raw in a quoted string, where YAML reads a line break
    odd = front_matter(envs=["openenv:a\x85b"], rows={"results.jsonl": 2}, license=None)
    text = front_matter_text(odd)
    assert DatasetCard(f"---\n{text}\n---\n").data.pretty_name == "openenv:a\x85b agent episodes"
