"""The generic ``openenv`` family: any OpenEnv server, no adapter code.

``--openenv-env=openenv:<label> --openenv-server URL`` reads the server's
``GET /schema`` once per process and exposes one tool, ``step``, whose
parameters are the server's action JSON schema. Observations are shown to the
model as JSON; reward and done come from the server, and the server validates
actions (its ``VALIDATION_ERROR`` reaches the model as a tool error). An episode
passes when its total reward is positive. ``<label>`` only names the env in
records and summaries.

There is no scripted move: drive it with an LLM policy or your own
``openenv_policy`` fixture.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from ..util.endpoints import ServerUnreachable, ServerURL
from .base import (
    ActionRejected,
    Backend,
    EnvConfigError,
    EnvFamily,
    EnvUnavailable,
    ProposedCall,
    StepResult,
    ToolSpec,
)
from .verdict import PassRule

TOOL_NAME = "step"
SCHEMA_TIMEOUT = 10.0
#: fields every OpenEnv Action has that are plumbing, not the agent's choice
PLUMBING_FIELDS = ("metadata",)


def action_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's action JSON schema as function-tool parameters."""
    params = {k: v for k, v in schema.items() if k not in ("title", "description")}
    properties = dict(params.get("properties") or {})
    for name in PLUMBING_FIELDS:
        properties.pop(name, None)
    params["type"] = "object"
    params["properties"] = properties
    required = [r for r in params.get("required") or [] if r in properties]
    if required:
        params["required"] = required
    else:
        params.pop("required", None)
    return params


def show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


#: what env names end in without saying anything (``echo_env``, ``EchoEnvironment``)
NAME_SUFFIXES = ("environment", "env")


def plain_name(name: str) -> str:
    """An env name reduced to what identifies it: ``Echo_Env`` and ``echo-environment`` -> echo."""
    plain = re.sub(r"[^a-z0-9]", "", name.lower())
    for suffix in NAME_SUFFIXES:
        if plain.endswith(suffix) and plain != suffix:
            return plain[: -len(suffix)]
    return plain


def list_server_tools(server: str) -> str:
    """An MCP-style env's tools (its ``list_tools`` action), as prompt lines; "" if none.

    Its one action carries ``tool_name`` and ``arguments``; without the names a model
    can only guess them.
    """
    from .remote.backend import RemoteBackend

    backend = RemoteBackend(server)
    backend.limit_time(SCHEMA_TIMEOUT)
    try:
        backend.reset(seed=0, episode_id="list-tools")
        tools = backend.step({"type": "list_tools"}).observation.get("tools")
    except (ActionRejected, EnvUnavailable):
        return ""
    finally:
        backend.close()
    if not isinstance(tools, list):
        return ""
    lines = [
        f"- {tool.get('name')}: {tool.get('description') or ''} "
        f"(arguments: {show(tool.get('input_schema') or tool.get('inputSchema') or {})})"
        for tool in tools
        if isinstance(tool, dict) and tool.get("name")
    ]
    if not lines:
        return ""
    return (
        f'Tools on this server (call {TOOL_NAME} with type "call_tool", tool_name and '
        "arguments):\n" + "\n".join(lines)
    )


class GenericFamily(EnvFamily):
    name: ClassVar[str] = "openenv"
    #: the verdict is "reward > 0" (see ``pass_rule``)
    default_min_reward: ClassVar[float] = 0.0
    system_prompt: ClassVar[str] = (
        "You are an agent acting in an environment. Each observation is JSON. On each turn "
        f"call the {TOOL_NAME} tool once with an action that follows its schema."
    )

    def __init__(self, variant: str, config: dict[str, Any]) -> None:
        super().__init__(variant, config)
        self._tool: ToolSpec | None = None
        self._description = ""
        #: an MCP-style server's own tools (``list_tools``), shown in the first prompt
        self._server_tools = ""

    def bind_servers(self, servers: tuple[str, ...]) -> None:
        super().bind_servers(servers)
        if not servers:
            raise EnvConfigError(
                f"the generic family ({self.spec}) runs on a deployed OpenEnv server: pass "
                "--openenv-server URL (e.g. http://127.0.0.1:8000 or https://user-space.hf.space)"
            )
        self._tool = self._read_schema(ServerURL.parse(servers[0]))
        if "tool_name" in (self._tool.parameters.get("properties") or {}):
            self._server_tools = list_server_tools(servers[0])

    def _read_schema(self, server: ServerURL) -> ToolSpec:
        try:
            schemas = server.get_json("/schema", timeout=SCHEMA_TIMEOUT)
        except ServerUnreachable as exc:
            raise EnvConfigError(
                f"cannot read the action schema of {server.public}: {exc} (the generic family "
                "needs an OpenEnv server that serves GET /schema)"
            ) from None
        action = schemas.get("action") if isinstance(schemas, dict) else None
        if not isinstance(action, dict):
            raise EnvConfigError(
                f"GET {server.public}/schema has no 'action' JSON schema; is it an OpenEnv server?"
            )
        try:
            metadata = server.get_json("/metadata", timeout=SCHEMA_TIMEOUT)
        except ServerUnreachable:
            metadata = {}
        if isinstance(metadata, dict) and metadata.get("description"):
            self._description = str(metadata["description"]).strip()
        title = action.get("title") or "the action"
        return ToolSpec(
            name=TOOL_NAME,
            description=(
                f"Send one action to the environment ({self.variant}); the arguments are the "
                f"fields of {title}."
            ),
            parameters=action_parameters(action),
        )

    def tools(self) -> list[ToolSpec]:
        if self._tool is None:
            raise EnvConfigError(f"{self.spec} has no server bound; pass --openenv-server URL")
        return [self._tool]

    def embedded_backend(self) -> Backend:
        raise EnvConfigError(
            f"the generic family ({self.spec}) has no embedded engine: pass --openenv-server URL"
        )

    def remote_backend(self, server_url: str) -> Backend:
        from .remote.backend import RemoteBackend

        return RemoteBackend(server_url)

    def hosted_by(self, report: Any) -> dict[str, Any] | None:
        return {"name": report.name} if report.name else None

    def hosting_mismatch(self, hosted: dict[str, Any]) -> str | None:
        """The label must name what ``GET /metadata`` calls the env (``echo`` ~ ``echo_env``)."""
        label, name = plain_name(self.variant), plain_name(hosted["name"])
        if not label or not name or label in name or name in label:
            return None
        return (
            f"it calls itself {hosted['name']!r} (GET /metadata), which the label "
            f"{self.variant!r} does not name; use --openenv-env=openenv:{hosted['name']}"
        )

    def describe_task(self, first: StepResult) -> str:
        lines = [f"Environment: {self.variant}."]
        if self._description:
            lines.append(self._description)
        if self._server_tools:
            lines.append(self._server_tools)
        lines.append(f"Observation: {show(first.observation)}")
        if first.metadata:  # e.g. a maze's layout: part of what the server shows the agent
            lines.append(f"Metadata: {show(first.metadata)}")
        if first.done:
            lines.append("The episode is already over.")
        else:
            lines.append(f"Call {TOOL_NAME} with your action.")
        return "\n".join(lines)

    def describe_result(self, call: ProposedCall, result: StepResult) -> str:
        reward = 0.0 if result.reward is None else result.reward
        metadata = f"Metadata: {show(result.metadata)}\n" if result.metadata else ""
        return (
            f"Observation: {show(result.observation)}\n{metadata}"
            f"Reward: {reward:g}. Done: {'yes' if result.done else 'no'}."
        )

    def to_action(self, call: ProposedCall, current: StepResult) -> dict[str, Any]:
        if call.name != TOOL_NAME:
            raise ActionRejected(f"unknown tool {call.name!r}; the only tool is {TOOL_NAME}")
        # The server validates against its own schema; its error comes back as a tool error.
        return dict(call.arguments)

    def scripted_call(self, current: StepResult) -> ProposedCall | None:
        return None

    def builtin_policy_problem(self, policy: str) -> str | None:
        if policy in ("scripted", "random"):
            return (
                "the generic family has no scripted move and cannot list legal actions of an "
                "unknown env; drive it with openai, anthropic, pkg.module:callable or an "
                "openenv_policy fixture"
            )
        return None

    def pass_rule(self) -> PassRule:
        return PassRule(self.default_min_reward, above=True)
