"""An episode an agent program plays: the env session served to it, the row made from the
model calls the capture proxy saw.

The env session is the episode loop's own (``loop._Loop``): reset and task as for every
policy, each MCP tool call applied as the loop applies a policy's tool call (the same tool
errors, the same ``tool_trace``), and the same verdict. What differs is who drives: the
agent, in its own process, until the env is done, the agent exits or a bound ends it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from ..agents.adapter import AgentAdapter
from ..agents.capture import conversation
from ..agents.capture.records import summed_usage
from ..agents.capture.server import LIMIT_STATUS
from ..agents.runner import FLOODED, TIMEOUT, AgentBounds, AgentRun, AgentRunner
from ..agents.session import EnvTool, ToolAnswer
from ..envs.base import Backend, StepResult
from ..errors import AgentProgramFault, EpisodeError, EpisodeTimeout
from ..policies.base import ToolCall, Usage
from .loop import TOKEN_LIMIT
from .result import Episode

if TYPE_CHECKING:
    from .loop import _Loop


class AgentPlayer(Protocol):
    """What the loop reads of the agent policy (``agent_policy.AgentPolicy``)."""

    name: str
    version: str
    adapter: AgentAdapter
    runner: AgentRunner


class LoopSession:
    """The loop's env session as an agent sees it (``agents.session.AgentEnvSession``)."""

    def __init__(self, loop: _Loop, backend: Backend, current: StepResult, task: str) -> None:
        self.loop, self.backend, self.current, self._task = loop, backend, current, task
        self.count = 0

    def tools(self) -> list[EnvTool]:
        return [EnvTool(t.name, t.description, t.parameters) for t in self.loop.tool_specs]

    def task(self) -> str:
        return self._task

    @property
    def done(self) -> bool:
        return self.loop.done

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        self.count += 1
        call = ToolCall(f"mcp_{self.count}", name, json.dumps(arguments, ensure_ascii=False))
        loop = self.loop
        self.current = loop.current = loop.apply(self.backend, self.current, call)
        step = loop.steps[-1]
        text = str(loop.messages[-1].get("content", "")) if loop.messages else ""
        return ToolAnswer(text, "error" in step)


def play_with_agent(loop: _Loop, backend: Backend, policy: AgentPlayer) -> Episode:
    """Play ``loop``'s episode with the agent ``policy``; raises ``EpisodeError`` for what
    is not the agent's play (its program failing, the model endpoint, the time limit)."""
    current = loop.begin(backend)
    task = loop.steps[0]["observation"]
    session = LoopSession(loop, backend, current, task)
    timing: dict[str, float | None] = {}
    if not loop.done:
        bounds = AgentBounds(
            max_calls=loop.max_turns,
            deadline=loop.deadline,
            max_tokens=loop.limits.max_tokens,
            episode_id=loop.spec.episode_id,
        )
        run = policy.runner.play(session, bounds)
        startup = run.startup_seconds
        timing = {
            "startup_s": None if startup is None else round(startup, 4),
            "stop_s": round(run.stop_seconds, 4),
        }
        record_run(loop, run, task)
        if run.env_fault is not None:
            raise run.env_fault
        check_run(loop, run, policy)
    if loop.done and loop.family.reads_final_state:
        loop.final_state = loop.read_state(backend)
    episode = loop.finish(loop.last_observation())
    episode.agent = {"name": policy.adapter.name, "version": policy.version, **timing}
    return episode


def record_run(loop: _Loop, run: AgentRun, task: str) -> None:
    """The loop's transcript becomes the conversation the model saw (the agent's system
    prompt and tools included); its turns are the model calls answered."""
    messages, tools = conversation(run.calls)
    loop.messages = messages or [{"role": "user", "content": task}]
    loop.tools = tools
    prompt, completion = summed_usage(run.calls)
    loop.usage = Usage(prompt, completion)
    answered = sum(1 for call in run.calls if call.answered)
    loop.turns = loop.answered = answered
    if run.over_budget:
        loop.stopped = (
            f"{TOKEN_LIMIT}: the agent used {prompt + completion} tokens ({prompt} in, "
            f"{completion} out), over --openenv-episode-max-tokens={loop.limits.max_tokens}"
        )


def check_run(loop: _Loop, run: AgentRun, policy: AgentPlayer) -> None:
    """Raise for an end that is not the agent's play: the time limit, a flood, a model
    endpoint that failed, a program that crashed before the env ended the episode."""
    who = f"{policy.name} ({policy.version})"
    episode_id = loop.spec.episode_id
    if run.stopped == TIMEOUT:
        raise loop.failed(
            EpisodeTimeout(
                f"episode {episode_id} exceeded --openenv-timeout={loop.limits.timeout:g}s; "
                f"{who} was stopped after {loop.turns} model call(s)\n{run.tail()}"
            )
        )
    if run.stopped == FLOODED:
        raise loop.failed(
            AgentProgramFault(
                f"{who} flooded its output (over the bound on stdout + stderr) during "
                f"{episode_id} and was stopped\n{run.tail(500)}"
            )
        )
    refused = run.over_limit or run.over_budget
    for call in run.calls:
        if call.error is not None and not (refused and call.status == LIMIT_STATUS):
            raise loop.failed(
                EpisodeError(
                    f"the model endpoint failed during {episode_id}: HTTP {call.status}: "
                    f"{call.error}"
                )
            )
    if run.stopped is None and not loop.done and not refused and run.returncode != 0:
        raise loop.failed(
            AgentProgramFault(
                f"{who} exited with status {run.returncode} before the env ended "
                f"{episode_id}\n{run.tail()}"
            )
        )
