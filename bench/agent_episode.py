"""What an agent episode costs beside our own loop's, measured in one run: the capture proxy
per model call, the MCP bridge per env tool call, each agent program's start-up, and whole
episodes at a set model latency.

    python bench/agent_episode.py [--calls 300] [--agents claude-code,codex,opencode]
                                  [--latency 0.05] [--episodes 5] [--proxy-calls 100]

0. ``bench/capture_proxy.py`` with ``--proxy-calls`` calls a row, one round: the proxy's
   wall and CPU per model call in each dialect against the same calls made directly.
1. The env's tool served over MCP (``pytest_openenv/agents/mcp_bridge.py``): ``--calls``
   calls through the ``mcp`` SDK's streamable-HTTP client against the same calls made on the
   session directly. The client runs in a child process, as an agent program does, so this
   process's CPU over the calls is the bridge's own. Prints the wall ms per call (median)
   both ways, the bridge's CPU ms per call, and the client's (the child's, for scale).
2. Each agent program on PATH, started as an episode starts it (its own HOME, config files,
   the capture proxy in front of ``tests/servers/agent_model.py`` answering in
   ``--latency`` seconds), given a tool it does not play, so the model answers in text at
   once: the seconds from start to exit less its model calls' time, which is the agent's
   start-up and exit. Three runs each, the best kept (the machine is shared: other work
   only ever makes a run slower).
3. Where one agent episode's time goes: a three-move game (the bench's own env session)
   split into start-up, model calls, env tool calls, the hand-overs between them (the
   agent's own work plus the proxy's and the bridge's transport) and ending the agent.
4. One pytest run in which our own loop (``openai``) and each agent play the same
   ``--episodes`` tic-tac-toe seeds against that model server: each policy's mean episode
   wall time from its rows, an agent's less its start-up as its rows record it (its start
   to its first model call), as a ratio to our loop's, whole and per model call (an agent
   makes one more call, to see the game's end), and the part spent ending its process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers.agent_model import serve_agent_model  # noqa: E402
from servers.fake_model import Faults  # noqa: E402

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


def client_main(url: str, calls: int) -> None:
    """The child: the calls, then one JSON line of their wall times and its own CPU."""
    cpu = time.process_time()
    times = asyncio.run(mcp_calls(url, calls))
    print(json.dumps({"times": times, "cpu": time.process_time() - cpu}))


def bridge_row(calls: int) -> None:
    session = Session()
    direct = []
    for i in range(calls):
        start = time.perf_counter()
        session.call("play_move", {"action_id": i % 9})
        direct.append(time.perf_counter() - start)
    with McpBridge(session) as bridge:
        # the client's imports and connection are its own start-up, not the bridge's calls:
        # the child says when it is ready and the bridge's CPU is read from then
        child = subprocess.Popen(
            [sys.executable, __file__, "--client", bridge.url, "--calls", str(calls)],
            stdout=subprocess.PIPE,
            text=True,
        )
        cpu = time.process_time()
        out, _ = child.communicate()
        cpu = time.process_time() - cpu
    measured = json.loads(out.strip().splitlines()[-1])
    # the bridge also answered the client's initialize and its session's end: a few calls'
    # worth over `calls`, so the figure below is a slight overstatement
    print(f"env tool call, direct:      {statistics.median(direct) * 1000:8.3f} ms (median)")
    through = statistics.median(measured["times"]) * 1000
    print(f"env tool call, through MCP: {through:8.3f} ms (median)")
    print(f"  bridge CPU per call: {cpu / calls * 1000:.2f} ms ({calls} calls; target <= 2 ms)")
    print(f"  client CPU per call: {measured['cpu'] / calls * 1000:.2f} ms (the child, for scale)")


def startup_row(agents: list[str], latency: float) -> dict[str, float]:
    """Each agent's seconds per episode apart from its model calls: start-up and exit."""
    startups: dict[str, float] = {}
    with serve_agent_model(Faults(delay=latency)) as server:
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
                    answered = [c for c in run.calls if c.answered]
                    if run.returncode == 0 and answered:
                        own = run.seconds - sum(c.seconds for c in answered)
                        best = own if best is None else min(best, own)
            finally:
                runner.close()
            if best is not None:
                startups[name] = best
            shown = "failed" if best is None else f"{best:6.2f} s"
            print(
                f"{name:12s} start-up and exit per episode, model calls apart: {shown} (best of 3)"
            )
    return startups


class Game(Session):
    """Three moves, then over: the model server plays while a tool result lists legal
    actions, and answers in text once one says the game is over."""

    def __init__(self) -> None:
        super().__init__()
        self.moves = 0
        #: (start, end) of each tool call, ``time.monotonic()``
        self.spans: list[tuple[float, float]] = []

    @property
    def done(self) -> bool:  # type: ignore[override]
        return self.moves >= 3

    def task(self) -> str:
        return "Play tic-tac-toe. Legal actions: 0, 1, 2"

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        start = time.monotonic()
        self.moves += 1
        text = "Legal actions: 3, 4" if self.moves < 3 else "The game is over."
        self.spans.append((start, time.monotonic()))
        return ToolAnswer(text)


def timeline_row(agents: list[str], latency: float) -> None:
    """Where one agent episode's time goes: a three-move game per agent (the best of three
    runs), split into start-up, model calls, env tool calls, the time between them (the
    agent's own work, and the transports: the proxy's and the bridge's), and ending it."""
    print(f"one three-move game per agent, {latency * 1000:.0f} ms per model call:")
    with serve_agent_model(Faults(delay=latency)) as server:
        upstream = Upstream(server.base_url, "chat", None, "bench-model")
        for name in agents:
            runner = AgentRunner(build_adapter(name), upstream, "bench-model")
            best: tuple[float, ...] | None = None
            try:
                for _ in range(3):
                    game = Game()
                    run = runner.play(game, AgentBounds(max_calls=10, deadline=None))
                    if run.startup_seconds is None or not game.done:
                        continue
                    model = sum(c.seconds for c in run.calls)
                    tools = sum(end - start for start, end in game.spans)
                    between = run.seconds - run.startup_seconds - model - tools - run.stop_seconds
                    figures = (run.seconds, run.startup_seconds, model, tools, between)
                    figures += (run.stop_seconds, len(run.calls), len(game.spans))
                    if best is None or figures[0] < best[0]:
                        best = figures
            finally:
                runner.close()
            if best is None:
                print(f"  {name:12s} did not finish the game")
                continue
            total, startup, model, tools, between, stop, calls, moves = best
            print(
                f"  {name:12s} {total:.3f} s: start-up {startup:.3f}, {int(calls)} model calls "
                f"{model:.3f}, {int(moves)} tool calls {tools:.4f}, between them {between:.3f} "
                f"({between / (calls + moves) * 1000:.0f} ms per hand-over), ending {stop:.3f}"
            )


def episode_row(agents: list[str], latency: float, episodes: int) -> None:
    """Tic-tac-toe played by our own loop and by each agent, in one pytest run (the same
    seeds, flags and model server), the model answering in ``latency`` seconds: each
    policy's mean episode wall time from its rows, an agent's less its start-up as the row
    records it (``extra.agent_startup_s``: its start to its first model call)."""
    with serve_agent_model(Faults(delay=latency)) as server, tempfile.TemporaryDirectory() as out:
        policies = ["openai", *(f"agent:{name}" for name in agents)]
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            out,
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={episodes}",
            "--openenv-model=bench-model",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-max-turns=20",
            f"--openenv-output={out}/results",
            *(f"--openenv-policy={p}" for p in policies),
        ]
        done = subprocess.run(argv, cwd=out, capture_output=True, text=True, check=False)
        rows = [
            json.loads(line)
            for name in ("results.jsonl", "failures.jsonl")
            if (path := Path(out, "results", name)).exists()
            for line in path.read_text().splitlines()
            if line.strip()
        ]
    rows = [r for r in rows if r.get("failure", {}).get("outcome") != "error"]
    if done.returncode not in (0, 1) or not rows:
        print(f"episode run failed (exit {done.returncode}):\n{done.stdout[-2000:]}")
        return
    print(f"tic-tac-toe at {latency * 1000:.0f} ms per model call, {episodes} seeds each:")
    own = None
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        if not mine:
            print(f"  {policy:18s} no episode played")
            continue
        wall = statistics.mean(r["metrics"]["wall_time_s"] for r in mine)
        calls = statistics.mean(r["metrics"]["turns"] for r in mine)
        if own is None:
            own = (wall, wall / calls)
            print(f"  {policy:18s} {wall:6.3f} s per episode, {calls:.1f} model calls")
            continue
        startup = statistics.mean(r["extra"].get("agent_startup_s") or 0.0 for r in mine)
        stop = statistics.mean(r["extra"].get("agent_stop_s") or 0.0 for r in mine)
        played = wall - startup
        print(
            f"  {policy:18s} {wall:6.3f} s per episode: start-up {startup:.3f} s, then "
            f"{played:.3f} s ({played / own[0]:.2f}x our loop; target <= 1.2x) of which "
            f"{stop:.3f} s ending it; {calls:.1f} model calls ({played / calls * 1000:.0f} ms "
            f"per call, {played / calls / own[1]:.2f}x ours)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--agents", default="claude-code,codex,opencode")
    parser.add_argument(
        "--proxy-calls", type=int, default=100, help="per row of the proxy's bench; 0: none"
    )
    parser.add_argument("--latency", type=float, default=0.05, help="model seconds per call")
    parser.add_argument("--episodes", type=int, default=5, help="per policy; 0: no such row")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.client:
        client_main(args.client, args.calls)
        return
    if args.proxy_calls:
        # the capture proxy's own bench, in this same run: its upstream and each proxy in
        # processes of their own, so its CPU figure is the proxy's alone
        print("the capture proxy per model call (bench/capture_proxy.py):", flush=True)
        proxy_bench = ROOT / "bench" / "capture_proxy.py"
        calls = str(args.proxy_calls)
        subprocess.run(
            [sys.executable, proxy_bench, "--calls", calls, "--rounds", "1"], check=False
        )
    bridge_row(args.calls)
    startups = startup_row([a for a in args.agents.split(",") if a], args.latency)
    timeline_row(list(startups), args.latency)
    if args.episodes:
        episode_row(list(startups), args.latency, args.episodes)


if __name__ == "__main__":
    main()
