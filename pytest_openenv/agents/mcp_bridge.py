"""The env's tools served to an agent over MCP (streamable HTTP on loopback), one per episode.

Built on the ``mcp`` SDK's low-level server, so the tools keep the env's own JSON schemas and
descriptions, and arguments reach the env as the agent sent them (the SDK's input validation
is off: the env answers a wrong call with the same tool error our own loop's calls get). The
server runs under uvicorn on a thread of its own with its own event loop.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

from .session import AgentEnvSession

#: the MCP server's name in every agent's config: Claude Code calls its tools
#: ``mcp__openenv__TOOL``, Codex ``openenv.TOOL``, OpenCode ``openenv_TOOL``
SERVER_NAME = "openenv"
#: seconds to wait for the server to listen, and for it to stop
START_TIMEOUT = 20.0


def warm_up() -> None:
    """Import what serving needs (uvicorn, starlette, the SDK's server: seconds on a busy
    machine), so the first episode does not pay it."""
    import uvicorn  # noqa: F401
    from mcp.server.lowlevel import Server  # noqa: F401
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: F401
    from starlette.applications import Starlette  # noqa: F401


class _EndedStreamFilter(logging.Filter):
    """Drops the SDK's report of a session's event stream closing under it: every agent is
    stopped at its episode's end with that stream open, which is no fault of anyone's."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "ClosedResourceError"


_ENDED_STREAM_FILTER = _EndedStreamFilter()


class McpBridge:
    """Serves ``session``'s tools at ``url`` until ``close``.

    A tool call that raises (the env's server went away) is answered to the agent as an
    error and kept in ``fault``: the episode is an infrastructure error, not the agent's.
    """

    def __init__(
        self,
        session: AgentEnvSession,
        name: str = SERVER_NAME,
        wake: threading.Event | None = None,
    ) -> None:
        self.session = session
        #: set after every tool call: the env may be done now
        self.wake = wake or threading.Event()
        self.name = name
        self.fault: BaseException | None = None
        #: tool calls the agent made through the bridge
        self.calls = 0
        self._step = threading.Lock()
        self._socket: socket.socket | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        import uvicorn

        # the SDK's logger, not ours: adding the same filter object twice is a no-op
        logging.getLogger("mcp.server.streamable_http").addFilter(_ENDED_STREAM_FILTER)

        # IPPROTO_TCP named, not left 0: asyncio turns Nagle off (TCP_NODELAY) only on the
        # connections of a socket whose proto says TCP, and with Nagle on, every answer's body
        # waits out the agent's delayed ACK (40 ms per env step) behind its headers
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        port = sock.getsockname()[1]
        config = uvicorn.Config(self._app(), log_level="critical", lifespan="on", access_log=False)
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=self._serve, args=(server, sock), name="openenv-mcp", daemon=True
        )
        self._thread.start()
        started = threading.Event()
        for _ in range(int(START_TIMEOUT / 0.01)):
            if server.started or not self._thread.is_alive():
                break
            started.wait(0.01)
        if not server.started:
            self.close()
            raise RuntimeError("the MCP server for the env's tools did not start")
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self.url

    def _app(self) -> Any:
        from mcp import types
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from starlette.applications import Starlette
        from starlette.routing import Route

        server: Server[Any, Any] = Server(self.name)
        tools = [
            types.Tool(name=t.name, description=t.description, inputSchema=t.parameters)
            for t in self.session.tools()
        ]

        @server.list_tools()
        async def list_tools() -> list[types.Tool]:
            return tools

        @server.call_tool(validate_input=False)
        async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            import anyio.to_thread

            answer = await anyio.to_thread.run_sync(self._call, name, arguments)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=answer[0])], isError=answer[1]
            )

        # one MCP session per agent, kept across its calls: a stateless manager builds a
        # transport and a server task per request, twice the bridge's CPU per tool call
        manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=False)

        @contextlib.asynccontextmanager
        async def lifespan(app: Any) -> AsyncIterator[None]:
            async with manager.run():
                yield

        return Starlette(routes=[Route("/mcp", endpoint=_Endpoint(manager))], lifespan=lifespan)

    def _call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        with self._step:  # one step at a time: an env session is not shared by two moves
            self.calls += 1
            try:
                if self.fault is not None:
                    return "Error: the environment is unavailable", True
                try:
                    answer = self.session.call(name, arguments)
                except Exception as exc:
                    self.fault = exc
                    return "Error: the environment is unavailable", True
                return answer.text, answer.is_error
            finally:
                self.wake.set()

    @staticmethod
    def _serve(server: Any, sock: socket.socket) -> None:
        try:
            server.run(sockets=[sock])
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    def close(self, wait: bool = True) -> None:
        """Stop serving; ``wait=False`` returns at once and the server ends on its own
        within uvicorn's tick (a tenth of a second), which an episode need not wait out once
        its agent is gone."""
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
        if thread is None:
            if self._socket is not None:
                with contextlib.suppress(OSError):
                    self._socket.close()
        elif wait:
            thread.join(START_TIMEOUT)

    @property
    def closed(self) -> bool:
        """Whether the server has ended (after ``close``)."""
        return self._thread is None or not self._thread.is_alive()

    def __enter__(self) -> McpBridge:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Endpoint:
    """The session manager as a plain ASGI app (a class instance, so Starlette's ``Route``
    hands it the raw request rather than wrapping it as a request handler)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)
