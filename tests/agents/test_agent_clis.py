"""Claude Code, Codex and OpenCode, the real programs from PATH, play tic-tac-toe through the
env's MCP tool and the capture proxy against our scripted model server; each row holds the
conversation the model saw, the env's tool calls, the verdict, the policy and the version."""

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
from helpers import played_rows

#: agent -> its program on PATH, how it names the env's tool, what its system prompt says
AGENTS = {
    "claude-code": ("claude", "mcp__openenv__play_move", "Claude"),
    "codex": ("codex", "mcp__openenv__play_move", "Codex"),
    "opencode": ("opencode", "openenv_play_move", "opencode"),
}


def version_of(program: str, home: str) -> str:
    out = subprocess.run(
        [program, "--version"], capture_output=True, text=True, env={"HOME": home}, timeout=60
    ).stdout
    return next(word for word in out.split() if any(c.isdigit() for c in word))


@pytest.mark.slow
@pytest.mark.parametrize("agent", list(AGENTS))
def test_a_real_agent_cli_plays_episodes_recorded_as_its_model_saw_them(
    run_pytest,
    pytester: pytest.Pytester,
    agent_model,
    monkeypatch: pytest.MonkeyPatch,
    agent: str,
) -> None:
    program, tool, prompt_word = AGENTS[agent]
    assert shutil.which(program), f"{program} is not on PATH"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    result = run_pytest(
        *agent_options(agent_model, f"agent:{agent}", "--openenv-timeout=240"), "-n", "0"
    )
    rows = played_rows(pytester.path / "openenv-results")
    assert len(rows) == 2, result.stdout.str()[-3000:]
    version = version_of(program, str(pytester.path))
    for row in rows:
        assert row["policy"] == f"agent:{agent}"
        assert row["model"] == MODEL
        assert (row["extra"]["agent"], row["extra"]["agent_version"]) == (agent, version)
        assert_played_by(row, tool)
        # the agent's own system prompt and tools are what the model saw
        assert row["messages"][0]["role"] == "system"
        assert prompt_word in row["messages"][0]["content"]
        assert len(row["tools"]) > 1
        assert any(row["task"]["prompt"] in m["content"] for m in row["messages"][1:4])
        assert row["metrics"]["prompt_tokens"] > 0
        assert row["verify_metrics"]["outcome"] in ("win", "loss", "draw")
        if "failure" in row:  # a lost game fails its test; it never errors
            assert row["failure"]["outcome"] == "failed"
    metadata = json.loads((pytester.path / "openenv-results" / "metadata.json").read_text())
    assert metadata["agents"] == [
        {"policy": f"agent:{agent}", "model": MODEL, "agent": agent, "agent_version": version}
    ]
    passed = sum(1 for row in rows if row["passed"])
    result.assert_outcomes(passed=passed, failed=2 - passed)
    # the run's key reached the model server through the proxy, and no file or line
    assert agent_model.authorizations and all(
        auth == f"Bearer {KEY}" for auth in agent_model.authorizations
    )
    for path in pytester.path.rglob("*"):
        if path.is_file():
            assert KEY_MARKER.encode() not in path.read_bytes(), path
    assert KEY_MARKER not in result.stdout.str() + result.stderr.str()


@pytest.mark.slow
def test_an_agent_cli_drives_a_generic_openenv_mcp_server(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    from servers.openenv_servers import serve_in_thread

    with serve_in_thread("mcp_echo") as server:
        result = run_pytest(
            "--openenv-env=openenv:mcp_echo",
            f"--openenv-server={server.url}",
            "--openenv-n=1",
            "--openenv-policy=agent:claude-code",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
            "--openenv-timeout=240",
            "-n",
            "0",
        )
    result.assert_outcomes(passed=1)
    [row] = played_rows(pytester.path / "openenv-results")
    assert row["reward"] == 1.0 and row["done"] is True
    [entry] = row["tool_trace"]
    assert entry["tool_name"] == "step"
    assert entry["arguments"]["tool_name"] == "echo_message"
    calls = [c for m in row["messages"] for c in m.get("tool_calls", [])]
    assert [c["function"]["name"] for c in calls] == ["mcp__openenv__step"]
