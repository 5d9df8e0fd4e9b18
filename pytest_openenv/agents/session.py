"""What an agent's runner needs of an env session, described here so the agents never import
the episode loop or the env families (the loop adapts its own session to it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class EnvTool:
    """One of the env's tools as the agent is offered it over MCP."""

    name: str
    description: str
    #: the tool's arguments as a JSON schema (an object schema)
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolAnswer:
    """What a tool call gave back: the observation text, and whether the env refused it."""

    text: str
    is_error: bool = False


class AgentEnvSession(Protocol):
    """One episode's env session, driven by an agent through its tools.

    ``call`` steps the env exactly as the episode loop's own tool calls do (a refused call is
    an error answer the agent sees, never an exception); it is called from the MCP bridge's
    thread, one call at a time.
    """

    def tools(self) -> list[EnvTool]: ...

    def task(self) -> str:
        """The first observation: the agent's task."""
        ...

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer: ...

    @property
    def done(self) -> bool:
        """Whether the env has ended the episode."""
        ...
