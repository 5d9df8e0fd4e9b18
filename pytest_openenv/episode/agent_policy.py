"""``--openenv-policy=agent:NAME``: an agent program plays the episode (``agents/``).

The policy is built before any episode like every other one, so each misfit is a usage
error then: an unknown agent, its program missing, ``agent:command`` without a template, no
model, no key for the official API. It never answers a turn: the episode loop hands it the
whole episode (``agent_loop.py``).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..agents.adapter import AgentAdapter
from ..agents.capture import Upstream
from ..agents.registry import build_adapter
from ..agents.runner import AgentRunner
from ..config.settings import Settings
from ..envs.base import Backend
from ..errors import AgentUnavailable, PolicyUnavailable
from ..policies.base import Policy, Reply, Turn
from ..policies.cache import ResponseCache, cache_root
from ..policies.registry import AGENT_PREFIX
from ..util.secrets import KnownSecrets
from .agent_cache import AgentCallCache
from .agent_loop import play_with_agent
from .result import Episode

if TYPE_CHECKING:
    from .loop import _Loop

#: the official APIs an agent's calls go to without --openenv-llm-endpoint
OPENAI_API = "https://api.openai.com/v1"
ANTHROPIC_API = "https://api.anthropic.com"


class AgentPolicy(Policy):
    """An agent program with its model: what rows record as ``policy`` and ``extra.agent``."""

    def __init__(self, adapter: AgentAdapter, version: str, runner: AgentRunner) -> None:
        self.adapter = adapter
        self.version = version
        self.runner = runner
        self.name = f"{AGENT_PREFIX}{adapter.name}"  # type: ignore[misc]
        self.model = runner.model

    def drive_episode(self, loop: _Loop, backend: Backend) -> Episode:
        """Play the episode ``run_episode`` opened (``agent_loop.play_with_agent``)."""
        return play_with_agent(loop, backend, self)

    def load(self, *, strict: bool) -> None:
        """Import the MCP server's stack now, in a process that plays: seconds of imports
        must not count against the first episode's --openenv-timeout."""
        from ..agents.mcp_bridge import warm_up

        warm_up()

    def act(self, turn: Turn) -> Reply:
        raise PolicyUnavailable(f"{self.name} plays whole episodes, not single turns")

    def describe(self) -> dict[str, Any]:
        described = {
            "policy": self.name,
            "model": self.model,
            "agent": self.adapter.name,
            "agent_version": self.version,
            # where the kernel cannot refuse them, an agent's writes outside its folder land
            "agent_writes": "its episode's folder"
            + "".join(f", {folder}" for folder in self.runner.writable)
            if self.runner.confined
            else "anywhere its user may write (no Landlock on this machine)",
        }
        store = self.runner.store
        if isinstance(store, AgentCallCache):
            described.update(cache=str(store.cache.root), replay=store.replay)
        return described

    def close(self) -> None:
        self.runner.close()


def upstream_for(adapter: AgentAdapter, settings: Settings, model: str) -> Upstream:
    """Where the agent's calls go: ``--openenv-llm-endpoint``, else the official API of the
    agent's dialect (Anthropic for Claude Code, OpenAI otherwise), whose key must be set."""
    llm = settings.llm
    if llm.endpoint:
        key = "OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None
        return Upstream(llm.endpoint, "chat", key, model, timeout=llm.request_timeout)
    if adapter.dialect == "anthropic":
        base, dialect, key = ANTHROPIC_API, "anthropic", "ANTHROPIC_API_KEY"
    else:
        base, dialect, key = OPENAI_API, "chat", "OPENAI_API_KEY"
    if not os.environ.get(key) and not settings.llm.replay:  # a replay sends no call
        raise pytest.UsageError(
            f"--openenv-policy={AGENT_PREFIX}{adapter.name} without --openenv-llm-endpoint "
            f"sends its model calls to {base}, which needs {key} in the environment; set it, "
            "or give --openenv-llm-endpoint URL (any OpenAI-compatible server)"
        )
    return Upstream(base, dialect, key, model, timeout=llm.request_timeout)  # type: ignore[arg-type]


#: what the MCP bridge serves the env's tools with (the ``agents`` extra)
SERVING_MODULES = ("mcp", "uvicorn", "starlette")


def importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module set to None in sys.modules: importing it fails as missing
        return False


def build_agent_policy(settings: Settings, overload: Any = None, *, name: str) -> AgentPolicy:
    """The ``agent:NAME`` policy; every problem is a ``pytest.UsageError`` naming the fix."""
    agent = name[len(AGENT_PREFIX) :]
    missing = [module for module in SERVING_MODULES if not importable(module)]
    if missing:
        raise pytest.UsageError(
            f"--openenv-policy={name} serves the env's tools to the agent over MCP, which needs "
            f"{', '.join(missing)}: pip install 'pytest-openenv[agents]' (or pip install "
            f"{' '.join(missing)})"
        )
    try:
        adapter = build_adapter(agent, settings.run.agent_command)
        adapter.executable()
    except AgentUnavailable as exc:
        raise pytest.UsageError(str(exc)) from None
    model = settings.llm.model
    if not model:
        raise pytest.UsageError(
            f"--openenv-policy={name} needs --openenv-model M: the model the agent's calls "
            "are answered by (sent to --openenv-llm-endpoint, or the official API)"
        )
    root = cache_root(settings.llm)
    store = None
    if root is not None:
        secrets = KnownSecrets.from_settings(settings)
        store = AgentCallCache(
            ResponseCache(root, secrets),
            provider=name,
            model=model,
            replay=settings.llm.replay,
            volatile=adapter.volatile,
        )
    upstream = upstream_for(adapter, settings, model)
    with tempfile.TemporaryDirectory(prefix="openenv-agent-version-") as scratch:
        try:
            version = adapter.version(Path(scratch))
        except AgentUnavailable as exc:
            raise pytest.UsageError(f"--openenv-policy={name}: {exc}") from None
    runner = AgentRunner(adapter, upstream, model, store, settings.run.agent_writable)
    return AgentPolicy(adapter, version, runner)
