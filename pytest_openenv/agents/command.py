"""``agent:command``: any program, started from the ``--openenv-agent-command`` template.

The template is split like a shell line (no shell runs it) and each placeholder is filled
in per episode: ``{prompt}`` the task text, ``{prompt_file}`` a file holding it,
``{mcp_url}`` the env's MCP server, ``{mcp_config}`` a JSON file naming it in the usual
``mcpServers`` form, ``{base_url}`` the proxy's OpenAI-style base URL (``.../v1``),
``{proxy_url}`` the proxy without ``/v1`` (Anthropic SDKs add it), ``{model}`` the model id
and ``{workdir}`` the episode's directory. The program also finds the proxy and the token
in ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` and ``ANTHROPIC_BASE_URL`` /
``ANTHROPIC_API_KEY``, as the SDKs read them.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil

from ..errors import AgentUnavailable
from .adapter import AgentAdapter, EpisodeSetup, Launch, isolated_env

PLACEHOLDERS = (
    "prompt",
    "prompt_file",
    "mcp_url",
    "mcp_config",
    "base_url",
    "proxy_url",
    "model",
    "workdir",
)
_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class CommandAgent(AgentAdapter):
    """A program of the user's; its version is the template's program name."""

    name = "command"
    dialect = "chat"

    def __init__(self, template: str | None) -> None:
        if not template or not template.strip():
            raise AgentUnavailable(
                "--openenv-policy=agent:command needs --openenv-agent-command TEMPLATE, e.g. "
                "--openenv-agent-command='my-agent --task {prompt_file} --mcp {mcp_config} "
                "--base-url {base_url} --model {model}'"
            )
        try:
            words = shlex.split(template)
        except ValueError as exc:
            raise AgentUnavailable(f"--openenv-agent-command={template!r}: {exc}") from None
        unknown = sorted({f for w in words for f in _FIELD.findall(w)} - set(PLACEHOLDERS))
        if unknown:
            raise AgentUnavailable(
                f"--openenv-agent-command: unknown placeholder(s) "
                f"{', '.join('{' + u + '}' for u in unknown)}; "
                f"choose from {', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
            )
        if not any(f in ("prompt", "prompt_file") for w in words for f in _FIELD.findall(w)):
            raise AgentUnavailable(
                "--openenv-agent-command must say where the task goes: {prompt} (its text) "
                "or {prompt_file} (a file holding it)"
            )
        self.words = words
        self.program = words[0]
        self.install = ""

    def executable(self) -> str:
        found = shutil.which(self.program)
        if found is None:
            raise AgentUnavailable(
                f"--openenv-agent-command: `{self.program}` is not a program on PATH"
            )
        return found

    def version(self, scratch: object) -> str:
        """A user's program has no version we can ask for: the program is the version."""
        return self.program

    def launch(self, setup: EpisodeSetup) -> Launch:
        prompt_file = setup.workdir / ".openenv-task.txt"
        prompt_file.write_text(setup.task, encoding="utf-8")
        mcp_config = setup.workdir / ".openenv-mcp.json"
        servers = {"mcpServers": {setup.mcp_name: {"type": "http", "url": setup.mcp_url}}}
        mcp_config.write_text(json.dumps(servers), encoding="utf-8")
        values = {
            "prompt": setup.task,
            "prompt_file": str(prompt_file),
            "mcp_url": setup.mcp_url,
            "mcp_config": str(mcp_config),
            "base_url": setup.proxy_url + "/v1",
            "proxy_url": setup.proxy_url,
            "model": setup.model,
            "workdir": str(setup.workdir),
        }
        argv = [_FIELD.sub(lambda m: values[m.group(1)], word) for word in self.words]
        argv[0] = self.executable()
        env = isolated_env(setup)
        env.update(
            {
                "OPENAI_BASE_URL": values["base_url"],
                "OPENAI_API_KEY": setup.token,
                "ANTHROPIC_BASE_URL": setup.proxy_url,
                "ANTHROPIC_API_KEY": setup.token,
            }
        )
        return Launch(argv, env)
