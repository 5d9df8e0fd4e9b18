"""The agent programs built in: Claude Code, Codex and OpenCode, each in its headless mode.

Each gets the env's tools as one MCP server (``setup.mcp_name``), its model base URL pointed
at the capture proxy with the episode's token, and config files of its own under the
episode's HOME or working directory: nothing the user configured is read.
"""

from __future__ import annotations

import json

from .adapter import AgentAdapter, EpisodeSetup, Launch, isolated_env

#: the variable the proxy's per-episode token is passed in (Codex and OpenCode read it by name)
TOKEN_VARIABLE = "OPENENV_AGENT_TOKEN"


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a TOML basic string


class ClaudeCode(AgentAdapter):
    """``claude -p``: Anthropic Messages (streamed), MCP servers from ``--mcp-config``."""

    name = "claude-code"
    dialect = "anthropic"
    program = "claude"
    install = "npm install -g @anthropic-ai/claude-code"

    def launch(self, setup: EpisodeSetup) -> Launch:
        config = setup.workdir / ".openenv-mcp.json"
        servers = {"mcpServers": {setup.mcp_name: {"type": "http", "url": setup.mcp_url}}}
        config.write_text(json.dumps(servers), encoding="utf-8")
        env = isolated_env(setup)
        env.update(
            {
                "ANTHROPIC_BASE_URL": setup.proxy_url,
                "ANTHROPIC_API_KEY": setup.token,
                "CLAUDE_CONFIG_DIR": str(setup.home / ".claude"),
                # its side calls (titles, summaries) ask the same model, through the proxy
                "ANTHROPIC_SMALL_FAST_MODEL": setup.model,
                "ANTHROPIC_DEFAULT_HAIKU_MODEL": setup.model,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        )
        argv = [
            self.executable(),
            "-p",
            setup.task,
            "--output-format",
            "json",
            "--model",
            setup.model,
            "--mcp-config",
            str(config),
            "--strict-mcp-config",
            # the env's tools run without a prompt; every other tool keeps its default
            # (headless, a tool that asks for permission is refused)
            "--allowedTools",
            f"mcp__{setup.mcp_name}",
        ]
        return Launch(argv, env)


class Codex(AgentAdapter):
    """``codex exec``: OpenAI Responses (streamed), provider and MCP server in config.toml."""

    name = "codex"
    dialect = "responses"
    program = "codex"
    install = "npm install -g @openai/codex"
    #: it heads each tool result with the call's measured time
    volatile = (r"Wall time: [0-9.]+ seconds",)

    def launch(self, setup: EpisodeSetup) -> Launch:
        codex_home = setup.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        lines = [
            f"model = {_toml_string(setup.model)}",
            'model_provider = "openenv"',
            'approval_policy = "never"',
            'sandbox_mode = "read-only"',
            "",
            "[model_providers.openenv]",
            'name = "pytest-openenv capture proxy"',
            f"base_url = {_toml_string(setup.proxy_url + '/v1')}",
            f"env_key = {_toml_string(TOKEN_VARIABLE)}",
            'wire_api = "responses"',
            "",
            f"[mcp_servers.{setup.mcp_name}]",
            f"url = {_toml_string(setup.mcp_url)}",
            "required = true",
            # headless: the env's tools run without asking (approval_policy "never" refuses
            # every call that would ask)
            'default_tools_approval_mode = "approve"',
        ]
        (codex_home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        env = isolated_env(setup)
        env.update({"CODEX_HOME": str(codex_home), TOKEN_VARIABLE: setup.token})
        argv = [
            self.executable(),
            "exec",
            "--skip-git-repo-check",
            "--cd",
            str(setup.workdir),
            setup.task,
        ]
        return Launch(argv, env)


OPENCODE_OFF = (
    "AUTOUPDATE",
    "MODELS_FETCH",
    "DEFAULT_PLUGINS",
    "LSP_DOWNLOAD",
    "SHARE",
    "CLAUDE_CODE",
    "EXTERNAL_SKILLS",
)


class OpenCode(AgentAdapter):
    """``opencode run``: Chat Completions through ``@ai-sdk/openai-compatible``, config in
    the working directory's ``opencode.json``."""

    name = "opencode"
    dialect = "chat"
    program = "opencode"
    install = "npm install -g opencode-ai"

    def launch(self, setup: EpisodeSetup) -> Launch:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "model": f"openenv/{setup.model}",
            "provider": {
                "openenv": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "pytest-openenv capture proxy",
                    "options": {
                        "baseURL": setup.proxy_url + "/v1",
                        "apiKey": "{env:" + TOKEN_VARIABLE + "}",
                    },
                    "models": {setup.model: {"name": setup.model}},
                }
            },
            "mcp": {setup.mcp_name: {"type": "remote", "url": setup.mcp_url, "enabled": True}},
        }
        path = setup.workdir / "opencode.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        env = isolated_env(setup)
        env.update({TOKEN_VARIABLE: setup.token, "OPENCODE_CONFIG": str(path)})
        # offline and quiet: no model list or plugin fetched, nothing shared
        env.update({f"OPENCODE_DISABLE_{what}": "1" for what in OPENCODE_OFF})
        argv = [self.executable(), "run", "--model", f"openenv/{setup.model}", setup.task]
        return Launch(argv, env)
