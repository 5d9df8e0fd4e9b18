"""``agent:NAME`` -> an ``AgentAdapter``: the built-in programs, then the entry point group.

Built-ins are a table here (read with no metadata file, as the policy kinds are); third
parties register under ``pytest_openenv.agents`` an ``AgentAdapter`` subclass (or any
callable returning an instance), read only for a name that is not built in.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ..errors import AgentUnavailable
from .adapter import AgentAdapter

GROUP = "pytest_openenv.agents"
PREFIX = "agent:"

#: name -> ``module:attr`` of the adapter class
BUILT_IN: dict[str, str] = {
    "claude-code": "pytest_openenv.agents.builtin:ClaudeCode",
    "codex": "pytest_openenv.agents.builtin:Codex",
    "opencode": "pytest_openenv.agents.builtin:OpenCode",
    "command": "pytest_openenv.agents.command:CommandAgent",
}


@functools.cache
def installed_agents() -> dict[str, EntryPoint]:
    """Name -> entry point of the group (not loaded), read once per process."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def agent_names() -> list[str]:
    return [*BUILT_IN, *sorted(set(installed_agents()) - set(BUILT_IN))]


def build_adapter(name: str, command: str | None = None) -> AgentAdapter:
    """The adapter for ``agent:NAME``; ``command``: ``--openenv-agent-command``, which only
    ``agent:command`` reads. ``AgentUnavailable`` names the valid agents."""
    if name == "command":
        from .command import CommandAgent

        return CommandAgent(command)
    if name in BUILT_IN:
        module, _, attr = BUILT_IN[name].partition(":")
        found: Any = getattr(importlib.import_module(module), attr)
        return found()  # type: ignore[no-any-return]
    entry_point = installed_agents().get(name)
    if entry_point is None:
        raise AgentUnavailable(
            f"--openenv-policy={PREFIX}{name}: no agent of that name; choose one of: "
            f"{', '.join(PREFIX + n for n in agent_names())} (third parties add agents "
            f"through the entry point group {GROUP})"
        )
    try:
        adapter = entry_point.load()()
    except Exception as exc:
        raise AgentUnavailable(
            f"--openenv-policy={PREFIX}{name}: entry point {entry_point.value!r} in group "
            f"{GROUP} cannot be loaded ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(adapter, AgentAdapter):
        raise AgentUnavailable(
            f"--openenv-policy={PREFIX}{name}: entry point {entry_point.value!r} in group "
            f"{GROUP} gives {adapter!r}, not a pytest_openenv.agents.adapter.AgentAdapter"
        )
    return adapter
