"""Shared pieces of the agent tests: the model server agents play against, the run's options,
the agent programs of ``programs/``."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers.agent_model import AgentModelServer, serve_agent_model

PROGRAMS = Path(__file__).parent / "programs"
MODEL = "agent-test-model"
#: the key the run's environment holds: it must reach the model server and nothing else
KEY = "sk-proj-MARKERagentkey51c7e0d9aa"
KEY_MARKER = "MARKERagentkey"


@pytest.fixture(name="agent_model")
def agent_model_fixture() -> Iterator[AgentModelServer]:
    with serve_agent_model() as server:
        yield server


def agent_options(server: AgentModelServer, policy: str, *more: str, n: int = 2) -> list[str]:
    return [
        "--openenv-env=openspiel:tic_tac_toe",
        f"--openenv-n={n}",
        f"--openenv-policy={policy}",
        f"--openenv-model={MODEL}",
        f"--openenv-llm-endpoint={server.base_url}",
        "--openenv-max-turns=20",
        *more,
    ]


def program(name: str, *args: str) -> str:
    """An ``--openenv-agent-command`` running ``programs/NAME.py`` with this interpreter."""
    return shlex.join([sys.executable, str(PROGRAMS / f"{name}.py"), *args])


def assert_played_by(row: dict[str, Any], tool_suffix: str = "play_move") -> None:
    """The row holds a game the agent played through the env's tool, as the model saw it."""
    calls = [
        call
        for m in row["messages"]
        if m["role"] == "assistant"
        for call in m.get("tool_calls", [])
    ]
    assert calls and all(c["function"]["name"].endswith(tool_suffix) for c in calls)
    results = [m for m in row["messages"] if m["role"] == "tool"]
    assert len(results) >= len(row["tool_trace"]) - 1  # the last result, if the agent saw it
    assert row["tool_trace"] and all(e["tool_name"] == "play_move" for e in row["tool_trace"])
    # the env's answers in the trace are the tool results the model saw, in order (an agent
    # may wrap them: Codex adds the call's wall time)
    for message, entry in zip(results, row["tool_trace"], strict=False):
        assert entry["result"]["data"] in message["content"]
    assert any(t["function"]["name"].endswith(tool_suffix) for t in row["tools"])
    assert row["passed"] is (row["reward"] >= 0)
    assert row["done"] is True
