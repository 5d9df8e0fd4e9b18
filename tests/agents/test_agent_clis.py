"""A real agent CLI drives a generic OpenEnv server (an MCP env) through its one ``step`` tool.
Each CLI's tic-tac-toe rows are checked in ``test_agent_comparison.py``, which plays all
three on the same seeds."""

from __future__ import annotations

import pytest
from agent_helpers import (
    MODEL,
    agent_model_fixture,  # noqa: F401 - fixture
)
from helpers import played_rows


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
