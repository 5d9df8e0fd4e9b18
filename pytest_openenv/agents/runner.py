"""One agent episode: a fresh directory, the env's tools over MCP, the agent run to its end.

``AgentRunner`` is one per policy and process: it owns the adapter and the capture proxy
(started at the first episode, shared by the episodes in flight, each with its own proxy
session and token). ``play`` runs one episode's agent until the env says done (then it lets
the agent make one more model call, so the row ends with the agent seeing the last result),
the agent exits, a limit of the proxy session refuses a call, or the deadline passes; the
agent's whole process group is ended, and its directory removed, before it returns.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .adapter import AgentAdapter, EpisodeSetup
from .call_store import CallStore, KeyedProxy
from .capture import CapturedCall, CaptureProxy, ProxySession, Upstream
from .mcp_bridge import SERVER_NAME, McpBridge
from .process import AgentProcess
from .session import AgentEnvSession

#: seconds the agent may take, once the env said done, for the model call that sees the end
DONE_GRACE = 10.0
#: why a run was stopped by us (``AgentRun.stopped``)
DONE, LIMIT, TIMEOUT, FLOODED = "done", "limit", "timeout", "flooded"


@dataclass(frozen=True)
class AgentBounds:
    #: answered model calls allowed (the turn limit)
    max_calls: int | None
    #: ``time.monotonic()`` by which the agent is stopped (``--openenv-timeout``)
    deadline: float | None
    #: prompt + completion tokens allowed (``--openenv-episode-max-tokens``)
    max_tokens: int | None = None
    #: the episode's id: what a ``CallStore`` keys its calls by
    episode_id: str = ""


@dataclass(frozen=True)
class AgentRun:
    """What one agent run left: its model calls, how it ended, its output's tail."""

    calls: list[CapturedCall]
    #: ``done``, ``limit``, ``timeout`` or ``flooded`` when we stopped it; None: it exited
    stopped: str | None
    returncode: int | None
    over_limit: bool
    over_budget: bool
    stdout_tail: str
    stderr_tail: str
    #: the exception a tool call raised (the env's server went away), if any
    env_fault: BaseException | None
    seconds: float

    def tail(self, limit: int = 2000) -> str:
        """The end of its stderr and stdout, for a failure message."""
        parts = []
        for label, text in (("stderr", self.stderr_tail), ("stdout", self.stdout_tail)):
            text = text.strip()
            if text:
                parts.append(f"{label} (last {min(len(text), limit)} chars):\n{text[-limit:]}")
        return "\n".join(parts) if parts else "(no output)"


class AgentRunner:
    """Plays episodes with one agent program against one upstream model."""

    def __init__(
        self,
        adapter: AgentAdapter,
        upstream: Upstream,
        model: str,
        store: CallStore | None = None,
    ) -> None:
        self.adapter = adapter
        self.upstream = upstream
        self.model = model
        #: answers calls before the upstream (a response cache); None: straight upstream
        self.store = store
        self._proxy: CaptureProxy | None = None
        self._lock = threading.Lock()
        #: the agents running now: ended by ``close`` if their episode was abandoned
        self._running: set[AgentProcess] = set()

    def proxy(self) -> CaptureProxy:
        with self._lock:
            if self._proxy is None:
                proxy = (
                    CaptureProxy(self.upstream)
                    if self.store is None
                    else KeyedProxy(self.upstream, self.store)
                )
                proxy.start()
                self._proxy = proxy
            return self._proxy

    def play(self, session: AgentEnvSession, bounds: AgentBounds) -> AgentRun:
        proxy = self.proxy()
        model_session = proxy.open_session(max_calls=bounds.max_calls, max_tokens=bounds.max_tokens)
        root = Path(tempfile.mkdtemp(prefix="openenv-agent-"))
        if self.store is not None:
            self.store.begin(model_session.token, bounds.episode_id, root)
        bridge = McpBridge(session)
        process: AgentProcess | None = None
        started = time.monotonic()
        stopped: str | None = None
        try:
            workdir, home = root / "work", root / "home"
            workdir.mkdir()
            home.mkdir()
            setup = EpisodeSetup(
                workdir=workdir,
                home=home,
                task=session.task(),
                mcp_url=bridge.start(),
                mcp_name=SERVER_NAME,
                proxy_url=proxy.base_url,
                token=model_session.token,
                model=self.model,
            )
            launch = self.adapter.launch(setup)
            process = AgentProcess(launch.argv, launch.env, workdir)
            with self._lock:
                self._running.add(process)
            process.start()
            stopped = process.wait_until(_StopWhen(session, model_session, bridge), bounds.deadline)
        finally:
            if process is not None:
                process.close(hard=stopped in (TIMEOUT, FLOODED))
                with self._lock:
                    self._running.discard(process)
            bridge.close()
            model_session.close()
            if self.store is not None:
                self.store.end(model_session.token)
            shutil.rmtree(root, ignore_errors=True)
        assert process is not None
        return AgentRun(
            calls=list(model_session.calls),
            stopped=stopped,
            returncode=process.returncode,
            over_limit=model_session.over_limit,
            over_budget=model_session.over_budget,
            stdout_tail=process.stdout.text(),
            stderr_tail=process.stderr.text(),
            env_fault=bridge.fault,
            seconds=time.monotonic() - started,
        )

    def close(self) -> None:
        """Stop the proxy, and any agent still running (its episode was given up on)."""
        with self._lock:
            proxy, self._proxy = self._proxy, None
            running, self._running = list(self._running), set()
        for process in running:
            process.stop(hard=True)
        if proxy is not None:
            proxy.close()


class _StopWhen:
    """Asked every few milliseconds whether to stop the agent, and why."""

    def __init__(self, env: AgentEnvSession, model: ProxySession, bridge: McpBridge) -> None:
        self.env, self.model, self.bridge = env, model, bridge
        self.done_at: tuple[float, int] | None = None

    def __call__(self) -> str | None:
        if self.bridge.fault is not None:
            return DONE  # the env is gone: nothing the agent does now counts
        if self.model.limit_hit.is_set():
            return LIMIT
        if not self.env.done:
            return None
        now, answered = time.monotonic(), self.model.answered_calls
        if self.done_at is None:
            self.done_at = (now, answered)
            return None
        since, before = self.done_at
        if answered > before or now - since > DONE_GRACE:
            return DONE
        return None
