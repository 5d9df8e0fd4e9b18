"""What the MCP bridge adds to an env tool call, and each agent program's start-up per episode,
measured in one run.

    python bench/agent_episode.py [--calls 300] [--agents claude-code,codex,opencode]

1. The env's tool served over MCP (``pytest_openenv/agents/mcp_bridge.py``): ``--calls``
   calls through the ``mcp`` SDK's streamable-HTTP client against the same calls made on the
   session directly. Prints the wall ms per call (median) both ways, and the bridge's CPU ms
   per call (this process's CPU over the run / calls, the client's included: an upper bound).
2. Each agent program on PATH, started as an episode starts it (its own HOME, config files,
   the capture proxy in front of ``tests/servers/agent_model.py``), given a tool it does not
   play, so the model answers in text at once: the seconds from start to exit, which is the
   agent's start-up plus one model call. Three runs each, the best kept (the machine is
   shared: other work only ever makes a run slower).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers.agent_model import serve_agent_model  # noqa: E402

from pytest_openenv.agents.capture import Upstream  # noqa: E402
from pytest_openenv.agents.mcp_bridge import McpBridge  # noqa: E402
from pytest_openenv.agents.registry import build_adapter  # noqa: E402
from pytest_openenv.agents.runner import AgentBounds, AgentRunner  # noqa: E402
from pytest_openenv.agents.session import EnvTool, ToolAnswer  # noqa: E402

SCHEMA = {"type": "object", "properties": {"action_id": {"type": "integer"}}}


class Session:
    done = False

    def __init__(self, tool: str = "play_move") -> None:
        self.tool = tool

    def tools(self) -> list[EnvTool]:
        return [EnvTool(self.tool, "Play a move.", SCHEMA)]

    def task(self) -> str:
        return "Say hello."

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        return ToolAnswer(f"You played {arguments.get('action_id')}.")


async def mcp_calls(url: str, calls: int) -> list[float]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    times = []
    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as env:
        await env.initialize()
        for i in range(calls):
            start = time.perf_counter()
            await env.call_tool("play_move", {"action_id": i % 9})
            times.append(time.perf_counter() - start)
    return times


def bridge_row(calls: int) -> None:
    session = Session()
    direct = []
    for i in range(calls):
        start = time.perf_counter()
        session.call("play_move", {"action_id": i % 9})
        direct.append(time.perf_counter() - start)
    with McpBridge(session) as bridge:
        cpu = time.process_time()
        times = asyncio.run(mcp_calls(bridge.url, calls))
        cpu = time.process_time() - cpu
    print(f"env tool call, direct:      {statistics.median(direct) * 1000:8.3f} ms (median)")
    print(f"env tool call, through MCP: {statistics.median(times) * 1000:8.3f} ms (median)")
    print(f"  bridge + client CPU per call: {cpu / calls * 1000:.2f} ms ({calls} calls)")


def startup_row(agents: list[str]) -> None:
    with serve_agent_model() as server:
        upstream = Upstream(server.base_url, "chat", None, "bench-model")
        for name in agents:
            adapter = build_adapter(name)
            if shutil.which(adapter.program) is None:
                print(f"{name:12s} not on PATH ({adapter.install})")
                continue
            runner = AgentRunner(adapter, upstream, "bench-model")
            best = None
            try:
                for _ in range(3):
                    run = runner.play(Session("noop"), AgentBounds(max_calls=5, deadline=None))
                    answered = sum(1 for c in run.calls if c.answered)
                    if run.returncode == 0 and answered:
                        best = run.seconds if best is None else min(best, run.seconds)
            finally:
                runner.close()
            shown = "failed" if best is None else f"{best:6.2f} s"
            print(f"{name:12s} start-up + one model call per episode: {shown} (best of 3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--agents", default="claude-code,codex,opencode")
    args = parser.parse_args()
    bridge_row(args.calls)
    startup_row([a for a in args.agents.split(",") if a])


if __name__ == "__main__":
    main()
