"""The real agent CLIs talk to the capture proxy: each streams its first request in its own
dialect, gets a tool call it does not know, sends the tool's error back, and prints the
scripted model's final answer, which only a correctly read stream can give it.

The configuration here is the least each CLI needs to reach a base URL offline; the
adapters that run them in episodes are elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from capture_helpers import (
    KEY,
    KEY_ENV,
    proxy_to,
    upstream_key_fixture,  # noqa: F401 - fixture
)
from servers.agent_model import GAME_OVER, AgentModelServer
from servers.fake_model import Faults

from pytest_openenv.agents.capture import conversation

PROMPT = "Legal actions: 5, 6"
#: the scripted model: a play_move call first (a tool no CLI has), then this text
ANSWER = "I would play 5."


def codex(base_url: str, token: str, home: Path) -> tuple[list[str], dict[str, str]]:
    codex_home = home / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        'model = "agent-model"\nmodel_provider = "capture"\n'
        'approval_policy = "never"\nsandbox_mode = "read-only"\n'
        "[model_providers.capture]\n"
        f'name = "capture"\nbase_url = "{base_url}/v1"\n'
        'env_key = "CAPTURE_TOKEN"\nwire_api = "responses"\n'
    )
    command = ["codex", "exec", "--skip-git-repo-check", PROMPT]
    return command, {"CODEX_HOME": str(codex_home), "CAPTURE_TOKEN": token}


def claude(base_url: str, token: str, home: Path) -> tuple[list[str], dict[str, str]]:
    env = {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": token,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return ["claude", "-p", PROMPT, "--output-format", "json"], env


def opencode(base_url: str, token: str, home: Path) -> tuple[list[str], dict[str, str]]:
    config = {
        "provider": {
            "capture": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "capture",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": "{env:CAPTURE_TOKEN}"},
                "models": {"agent-model": {"name": "agent-model"}},
            }
        },
        "model": "capture/agent-model",
    }
    (home / "work" / "opencode.json").write_text(json.dumps(config))
    return ["opencode", "run", PROMPT], {"CAPTURE_TOKEN": token}


CLIS = {
    "codex": (codex, "responses"),
    "claude": (claude, "anthropic"),
    "opencode": (opencode, "chat"),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "upstream"),
    [("claude", "anthropic"), ("claude", "chat"), ("codex", "chat"), ("opencode", "chat")],
)
def test_the_real_cli_plays_through_the_proxy_in_its_dialect(
    upstream_key: str, tmp_path: Path, name: str, upstream: str
) -> None:
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed on this machine")
    configure, dialect = CLIS[name]
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    with proxy_to(upstream, Faults(turn_faults={2: "no_tool_call"})) as (proxy, server):
        session = proxy.open_session(max_calls=10)
        command, extra = configure(proxy.base_url, session.token, home)
        # the agent's environment: no variable of ours, and never the upstream key's
        env = {"PATH": os.environ["PATH"], "HOME": str(home), **extra}
        assert KEY_ENV not in env
        done = subprocess.run(
            command, env=env, cwd=home / "work", capture_output=True, text=True, timeout=120
        )

        assert done.returncode == 0, done.stderr[-2000:]
        assert ANSWER in done.stdout
        assert {call.dialect for call in session.calls} == {dialect}
        assert all(call.stream and call.answered for call in session.calls)
        if upstream == "chat":  # (the Messages server keeps no x-api-key to compare)
            assert set(server.authorizations) == {f"Bearer {KEY}"}
        messages, tools = conversation(session.calls)
        roles = [m["role"] for m in messages]
        # the main thread: the tool call, the CLI's error for it, the final answer
        assert roles[-3:] == ["assistant", "tool", "assistant"]
        assert messages[-1] == {"role": "assistant", "content": ANSWER}
        assert messages[-3]["tool_calls"][0]["id"] == messages[-2]["tool_call_id"]
        assert any(m["role"] == "user" and PROMPT in str(m["content"]) for m in messages)
        assert len(tools) >= 3 and all(t["type"] == "function" for t in tools)
        # nothing the CLI printed or wrote holds the key
        written = [p.read_bytes() for p in home.rglob("*") if p.is_file() and not p.is_symlink()]
        assert all(KEY.encode() not in data for data in written)
        assert KEY not in done.stdout + done.stderr


MCP_SERVER = '''
import sys
from mcp.server.fastmcp import FastMCP

server = FastMCP("openenv")


@server.tool()
def play_move(action_id: int) -> str:
    """Play one legal action."""
    with open(sys.argv[1], "a") as played:
        played.write(f"{action_id}\\n")
    return "You won."


server.run()
'''


@pytest.mark.slow
def test_codex_calls_an_mcp_tool_it_was_offered_in_a_namespace(
    upstream_key: str, tmp_path: Path
) -> None:
    if shutil.which("codex") is None:
        pytest.skip("codex is not installed on this machine")
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    script, played = tmp_path / "mcp_server.py", tmp_path / "played.txt"
    script.write_text(MCP_SERVER)
    # this model calls the offered tool whose name ends in play_move, whatever its prefix
    with proxy_to("chat", model_server=AgentModelServer) as (proxy, _server):
        session = proxy.open_session()
        command, env = codex(proxy.base_url, session.token, home)
        with (home / "codex" / "config.toml").open("a") as config:
            config.write(
                f"[mcp_servers.openenv]\ncommand = {json.dumps(sys.executable)}\n"
                f"args = [{json.dumps(str(script))}, {json.dumps(str(played))}]\n"
                # the adapters' config: approval "never" refuses MCP calls without this
                'required = true\ndefault_tools_approval_mode = "approve"\n'
            )
        done = subprocess.run(
            command,
            env={"PATH": os.environ["PATH"], "HOME": str(home), **env},
            cwd=home / "work",
            capture_output=True,
            text=True,
            timeout=120,
        )

        assert done.returncode == 0, done.stderr[-2000:]
        assert played.read_text() == "5\n"  # the call reached the MCP tool as the model made it
        assert GAME_OVER in done.stdout
        messages, tools = conversation(session.calls)
        assert "mcp__openenv__play_move" in [t["function"]["name"] for t in tools]
        assert messages[-3]["tool_calls"][0]["function"]["name"] == "mcp__openenv__play_move"
        assert "You won." in messages[-2]["content"]
