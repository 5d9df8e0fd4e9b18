"""Claude Code, Codex and OpenCode, the real programs from PATH, and our own tool-calling loop
play the same ten tic-tac-toe seeds in one run against the suite's model server: each agent
is an arm of its own on the one model, every episode is judged, the rows load with
``datasets`` and render through a chat template with their tool calls intact, no secret is in
any output, and the four arms are compared pairwise as models are."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from agent_helpers import (
    KEY,
    KEY_MARKER,
    MODEL,
    agent_model_fixture,  # noqa: F401 - fixture
    agent_options,
    assert_played_by,
)
from chat_templates import QWEN25, tokenizer_folder
from helpers import played_rows

from pytest_openenv.dataset.chat_template.render import Renderer
from pytest_openenv.dataset.chat_template.source import load_chat_template

#: agent -> its program on PATH, how it names the env's tool, what its system prompt says
AGENTS = {
    "claude-code": ("claude", "mcp__openenv__play_move", "Claude"),
    "codex": ("codex", "mcp__openenv__play_move", "Codex"),
    "opencode": ("opencode", "openenv_play_move", "opencode"),
}
N = 10
OWN_LOOP = "openai"


def version_of(program: str, home: str) -> str:
    out = subprocess.run(
        [program, "--version"], capture_output=True, text=True, env={"HOME": home}, timeout=60
    ).stdout
    return next(word for word in out.split() if any(c.isdigit() for c in word))


@pytest.mark.slow
def test_three_agent_clis_and_our_loop_play_the_same_seeds_as_compared_arms(
    run_pytest, pytester: pytest.Pytester, agent_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    for program, _, _ in AGENTS.values():
        assert shutil.which(program), f"{program} is not on PATH"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    template = tokenizer_folder(pytester.path / "models" / "qwen2.5", QWEN25, bos_token="<s>")
    policies = [f"--openenv-policy=agent:{agent}" for agent in AGENTS]
    options = agent_options(agent_model, OWN_LOOP, *policies, n=N)
    result = run_pytest(
        *options,
        "--openenv-timeout=240",
        "--openenv-concurrency=2",
        f"--openenv-chat-template={template}",
        "-n",
        "2",
    )
    out = pytester.path / "openenv-results"
    rows = played_rows(out)
    arms = [MODEL] + [f"agent:{agent} / {MODEL}" for agent in AGENTS]
    by_arm: dict[str, list[dict]] = {arm: [] for arm in arms}
    for row in rows:
        name = f"{row['policy']} / {MODEL}" if "agent" in row["extra"] else row["model"]
        by_arm[name].append(row)
    # ten judged episodes per arm, on the same seeds
    for arm, played in by_arm.items():
        assert len(played) == N, (arm, result.stdout.str()[-3000:])
        assert all(r["verify_metrics"]["outcome"] in ("win", "loss", "draw") for r in played)
        assert {r["policy"] for r in played} == {OWN_LOOP if arm == MODEL else arm.split(" / ")[0]}
        assert sorted(r["seed"] for r in played) == sorted(r["seed"] for r in by_arm[MODEL])
    passed = sum(1 for row in rows if row["passed"])
    result.assert_outcomes(passed=passed, failed=len(rows) - passed)

    # each agent's rows: the conversation its model saw, played through the env's tool
    versions = {}
    for agent, (program, tool, prompt_word) in AGENTS.items():
        versions[agent] = version_of(program, str(pytester.path))
        for row in by_arm[f"agent:{agent} / {MODEL}"]:
            assert row["model"] == MODEL
            assert (row["extra"]["agent"], row["extra"]["agent_version"]) == (
                agent,
                versions[agent],
            )
            assert_played_by(row, tool)
            # the agent's own system prompt and tools are what the model saw
            assert row["messages"][0]["role"] == "system"
            assert prompt_word in row["messages"][0]["content"]
            assert len(row["tools"]) > 1
            assert any(row["task"]["prompt"] in m["content"] for m in row["messages"][1:4])
            assert row["metrics"]["prompt_tokens"] > 0
            if "failure" in row:  # a lost game fails its test; it never errors
                assert row["failure"]["outcome"] == "failed"

    # the rows load with datasets and render through the chat template, tool calls intact
    from datasets import load_dataset

    loaded = load_dataset("json", data_files=str(out / "results.jsonl"), split="train")
    assert len(loaded) == sum(1 for row in rows if "failure" not in row) > 0
    renderer = Renderer(load_chat_template(str(template)))
    for row in rows:
        text = renderer.render(row["messages"], row["tools"])
        for call in (c for m in row["messages"] for c in m.get("tool_calls") or ()):
            assert call["function"]["name"] in text
        for entry in row["tool_trace"]:
            assert entry["result"]["data"] in text
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["chat_template"]["row_problems"] == []
    assert metadata["agents"] == [
        {
            "policy": f"agent:{agent}",
            "model": MODEL,
            "agent": agent,
            "agent_version": versions[agent],
            "agent_writes": "its episode's folder",
        }
        for agent in AGENTS
    ]

    # each agent is a group of its own, named with its version; the arms are compared paired
    summary = json.loads((out / "summary.json").read_text())
    groups = {group["name"]: group for group in summary["groups"]}
    assert set(groups) == set(arms)
    assert groups[MODEL]["agent"] is None and groups[MODEL]["policy"] == OWN_LOOP
    for agent in AGENTS:
        group = groups[f"agent:{agent} / {MODEL}"]
        version = by_arm[f"agent:{agent} / {MODEL}"][0]["extra"]["agent_version"]
        assert group["agent"] == f"{agent} {version}"
        assert group["label"].endswith(f"agent:{agent} {version} / {MODEL}")
        assert group["ran"] == N
    assert [m["name"] for m in summary["models"]] == arms  # in the order named
    comparisons = summary["comparisons"]
    assert len(comparisons) == 6  # every pair of the four arms
    for pair in comparisons:
        assert pair["paired_episodes"] == N
        a = {r["seed"]: r["passed"] for r in by_arm[pair["a"]]}
        b = {r["seed"]: r["passed"] for r in by_arm[pair["b"]]}
        assert pair["pass"]["test"].startswith("exact McNemar")
        assert pair["pass"]["only_a_passed"] == sum(a[s] and not b[s] for s in a)
        assert pair["pass"]["only_b_passed"] == sum(b[s] and not a[s] for s in a)
    text = result.stdout.str()
    for arm in arms:
        assert arm in text  # the paired table is printed

    # the run's key reached the model server only
    assert agent_model.authorizations
    for path in pytester.path.rglob("*"):
        if path.is_file() and "models" not in path.parts:
            assert KEY_MARKER.encode() not in path.read_bytes(), path
    assert KEY_MARKER not in text + result.stderr.str()
