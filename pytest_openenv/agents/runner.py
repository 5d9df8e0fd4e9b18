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
from .confine import landlock_abi, wrap
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
    #: seconds from the agent's start to its first model call (None: it made none)
    startup_seconds: float | None = None
    #: seconds its process group took to end once it exited or was stopped
    stop_seconds: float = 0.0

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
        writable: tuple[str, ...] = (),
    ) -> None:
        self.adapter = adapter
        self.upstream = upstream
        self.model = model
        #: answers calls before the upstream (a response cache); None: straight upstream
        self.store = store
        #: folders the agent may write to besides its episode's (``--openenv-agent-writable``)
        self.writable = writable
        #: whether the kernel confines the agent's writes to its folders (Landlock): where it
        #: cannot, the agent runs as the user's own programs do, and ``describe`` says so
        self.confined = landlock_abi() > 0
        self._proxy: CaptureProxy | None = None
        self._lock = threading.Lock()
        #: the agents running now: ended by ``close`` if their episode was abandoned
        self._running: set[AgentProcess] = set()
        #: MCP bridges of ended episodes still shutting down (waited for by ``close``)
        self._closing: list[McpBridge] = []

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
        # the proxy's and the bridge's calls wake the wait on the agent: it stops the agent
        # as soon as the episode is over, not at its next look
        wake = threading.Event()
        model_session = proxy.open_session(bounds.max_calls, bounds.max_tokens, wake)
        root = Path(tempfile.mkdtemp(prefix="openenv-agent-"))
        if self.store is not None:
            self.store.begin(model_session.token, bounds.episode_id, root)
        bridge = McpBridge(session, wake=wake)
        process: AgentProcess | None = None
        started = time.monotonic()
        stopped: str | None = None
        stop_seconds = 0.0
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
            argv = wrap(launch.argv, [str(root), *self.writable]) if self.confined else launch.argv
            process = AgentProcess(argv, launch.env, workdir)
            with self._lock:
                self._running.add(process)
            process.start()
            stop_when = _StopWhen(session, model_session, bridge)
            stopped = process.wait_until(stop_when, bounds.deadline, wake)
        finally:
            if process is not None:
                stopping = time.monotonic()
                # nothing of an agent is kept once its episode is over (its folder is
                # removed), so it gets no grace then either: SIGTERM's can cost a second
                process.close(hard=stopped in (TIMEOUT, FLOODED, DONE))
                stop_seconds = time.monotonic() - stopping
                with self._lock:
                    self._running.discard(process)
            # its agent is gone: the bridge ends on its own, and the episode goes on now
            bridge.close(wait=False)
            with self._lock:
                self._closing = [b for b in self._closing if not b.closed] + [bridge]
            model_session.close()
            if self.store is not None:
                self.store.end(model_session.token)
            shutil.rmtree(root, ignore_errors=True)
        assert process is not None
        calls = list(model_session.calls)
        first = min((call.received for call in calls), default=None)
        return AgentRun(
            calls=calls,
            stopped=stopped,
            returncode=process.returncode,
            over_limit=model_session.over_limit,
            over_budget=model_session.over_budget,
            stdout_tail=process.stdout.text(),
            stderr_tail=process.stderr.text(),
            env_fault=bridge.fault,
            seconds=time.monotonic() - started,
            startup_seconds=None if first is None else first - process.started,
            stop_seconds=stop_seconds,
        )

    def close(self) -> None:
        """Stop the proxy, and any agent still running (its episode was given up on)."""
        with self._lock:
            proxy, self._proxy = self._proxy, None
            running, self._running = list(self._running), set()
            closing, self._closing = self._closing, []
        for process in running:
            process.stop(hard=True)
        for bridge in closing:
            bridge.close()
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
