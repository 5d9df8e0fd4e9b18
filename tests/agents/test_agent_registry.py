"""Which agents there are, and every way ``agent:NAME`` cannot start: a usage error (exit 4)
before any episode, naming what would be right."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from agent_helpers import MODEL, agent_model_fixture  # noqa: F401 - fixture
from helpers import played_rows

from pytest_openenv.agents import registry
from pytest_openenv.agents.adapter import AgentAdapter, EpisodeSetup, isolated_env
from pytest_openenv.agents.builtin import ClaudeCode, Codex, OpenCode
from pytest_openenv.agents.command import CommandAgent
from pytest_openenv.errors import AgentUnavailable

THIRD_PARTY = """
from pytest_openenv.agents.adapter import AgentAdapter, Launch


class MiniSweAgent(AgentAdapter):
    name = "mini-swe"
    program = "python3"
    install = "pip install mini-swe-agent"

    def launch(self, setup):
        return Launch(["python3", "-c", "pass"], {})
"""


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution on sys.path that registers ``agent:mini-swe`` through the entry points."""
    (tmp_path / "mini_swe_adapter.py").write_text(THIRD_PARTY)
    info = tmp_path / "mini_swe_adapter-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mini-swe-adapter\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[pytest_openenv.agents]\nmini-swe = mini_swe_adapter:MiniSweAgent\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.installed_agents.cache_clear()
    yield
    registry.installed_agents.cache_clear()


def test_a_third_party_agent_comes_from_the_entry_point_group(third_party) -> None:
    adapter = registry.build_adapter("mini-swe")
    assert isinstance(adapter, AgentAdapter) and adapter.name == "mini-swe"
    assert "mini-swe" in registry.agent_names()


def test_the_built_in_agents_need_no_metadata() -> None:
    assert isinstance(registry.build_adapter("claude-code"), ClaudeCode)
    assert isinstance(registry.build_adapter("codex"), Codex)
    assert isinstance(registry.build_adapter("opencode"), OpenCode)
    assert isinstance(registry.build_adapter("command", "run {prompt}"), CommandAgent)


def test_an_unknown_agent_names_every_valid_one(third_party) -> None:
    with pytest.raises(AgentUnavailable) as raised:
        registry.build_adapter("gemini")
    for name in ("claude-code", "codex", "opencode", "command", "mini-swe"):
        assert f"agent:{name}" in str(raised.value)


@pytest.mark.parametrize(
    ("template", "says"),
    [
        (None, "needs --openenv-agent-command TEMPLATE"),
        ("my-agent --mcp {mcp_config}", "{prompt} (its text) or {prompt_file}"),
        ("my-agent {prompt} {api_key}", "unknown placeholder(s) {api_key}"),
        ("my-agent 'unclosed {prompt}", "No closing quotation"),
    ],
)
def test_a_command_template_that_cannot_run_says_what_is_wrong(
    template: str | None, says: str
) -> None:
    with pytest.raises(AgentUnavailable, match=None) as raised:
        CommandAgent(template)
    assert says in str(raised.value)


def test_an_agent_starts_from_an_environment_without_the_users_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-users-key")
    monkeypatch.setenv("HF_TOKEN", "hf_users_token")
    setup = EpisodeSetup(tmp_path / "w", tmp_path / "h", "task", "u", "openenv", "p", "tok", "m")
    (tmp_path / "w").mkdir()
    env = isolated_env(setup)
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HF_TOKEN"} & set(env)
    assert env["HOME"] == str(tmp_path / "h") and env["PATH"] == os.environ["PATH"]
    for adapter in (ClaudeCode(), Codex(), OpenCode()):
        launch = adapter.launch(setup)
        text = " ".join(launch.argv) + " ".join(launch.env.values())
        assert "users" not in text and "tok" in launch.env.values()


def _usage_error(result: pytest.RunResult) -> str:
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    assert "test_episode" not in result.stdout.str()  # before any episode
    return result.stderr.str()


@pytest.mark.slow
def test_an_unknown_agent_is_a_usage_error(run_pytest, agent_model) -> None:
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:gemini",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
        )
    )
    assert "agent:claude-code, agent:codex, agent:opencode, agent:command" in err


@pytest.mark.slow
def test_an_agent_program_not_on_path_says_how_to_install_it(
    run_pytest, agent_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:claude-code",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
        )
    )
    assert "needs `claude` on PATH" in err
    assert "npm install -g @anthropic-ai/claude-code" in err


@pytest.mark.slow
def test_an_agent_without_a_model_or_a_template_is_a_usage_error(run_pytest, agent_model) -> None:
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:codex",
            f"--openenv-llm-endpoint={agent_model.base_url}",
        )
    )
    assert "--openenv-policy=agent:codex needs --openenv-model" in err
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:command",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
        )
    )
    assert "needs --openenv-agent-command TEMPLATE" in err


@pytest.mark.slow
def test_an_agent_on_the_official_api_without_its_key_is_a_usage_error(
    run_pytest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:claude-code",
            "--openenv-model=claude-sonnet-4-5",
        )
    )
    assert "needs ANTHROPIC_API_KEY" in err


@pytest.mark.slow
def test_a_sampling_option_with_only_an_agent_playing_is_a_usage_error(
    run_pytest, agent_model
) -> None:
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:codex",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
            "--openenv-temperature=0.7",
        )
    )
    assert "--openenv-temperature=0.7 is set" in err and "does not sample" in err


@pytest.mark.slow
def test_a_system_prompt_with_only_agents_playing_is_a_usage_error_naming_why(
    run_pytest, agent_model
) -> None:
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:codex",
            "--openenv-policy=agent:opencode",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
            "--openenv-system-prompt=Play well.",
        )
    )
    assert "--openenv-system-prompt=Play well. is set" in err
    assert "plays with its own system prompt" in err


@pytest.mark.slow
def test_a_system_prompt_with_an_agent_and_our_loop_is_taken_for_our_loop(
    run_pytest, pytester: pytest.Pytester, agent_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-system-prompt")
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=1",
        "--openenv-policy=openai",
        "--openenv-policy=agent:codex",
        f"--openenv-model={MODEL}",
        f"--openenv-llm-endpoint={agent_model.base_url}",
        "--openenv-system-prompt=Play well.",
        "--openenv-timeout=240",
        "-n",
        "0",
    )
    assert result.ret in (0, 1), result.stderr.str()[-2000:]
    rows = played_rows(pytester.path / "openenv-results")
    own = [row for row in rows if row["policy"] == "openai"]
    assert own and own[0]["messages"][0]["content"] == "Play well."
    # the agent's row holds its own system prompt, not ours
    agent = [row for row in rows if row["policy"] == "agent:codex"]
    assert agent and "Play well." not in agent[0]["messages"][0]["content"]


def test_an_agent_without_the_mcp_stack_installed_is_a_usage_error_naming_the_extra(
    run_pytest, pytester: pytest.Pytester, agent_model
) -> None:
    # a module set to None in sys.modules imports as a missing package does
    pytester.makeconftest("import sys\nsys.modules['mcp'] = None\n")
    err = _usage_error(
        run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-policy=agent:codex",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={agent_model.base_url}",
        )
    )
    assert "serves the env's tools to the agent over MCP, which needs mcp" in err
    assert "pip install 'pytest-openenv[agents]'" in err
