"""pytest-openenv beside its peers on one workload, every repeat printed with its ratios.

    python bench/peers.py [--n 200] [--concurrency 16] [--delay 0.05] [--repeat 3]

The workload: N tic-tac-toe games, the agent an LLM that calls a ``play_move`` tool with
the id of a legal action, the model the suite's OpenAI-compatible test server
(``tests/servers/openai_compat.py``, in this process) with a fixed delay per completion
(its "model" plays the first legal action it reads after ``Legal actions:``), the
opponent random, seeded by the episode seed. Each side is a whole command in a fresh
process (imports included), rounds interleaved:

  - pytest-openenv, the env in process: ``--openenv-env=openspiel:tic_tac_toe
    --openenv-llm-endpoint ... --openenv-concurrency C``;
  - inspect-ai, when installed: a task of N samples whose solver plays the game with
    pyspiel in process and asks the model through inspect's ``openai`` provider
    (chat completions; ``max_connections`` and ``max_samples`` C), no sandbox;
  - OpenEnv's ``CollectRunner``, when the ``openenv`` package is installed, over a real
    OpenEnv tic-tac-toe server (``bench/vs_openenv.py``'s side: OpenEnv's collector
    plays one episode after another, it has no concurrency setting), beside
    pytest-openenv over the same server (``--openenv-server``) for like with like.

Printed per round: each side's wall time and CPU seconds (the side's processes; the
model server's own CPU apart), the peers' ratios to pytest-openenv (peer / ours: above 1,
we are faster or cheaper), and the reward mean each side measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchenv import PYTEST_QUIET, user_env

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
HERE = Path(__file__).resolve()


# -- the inspect-ai side (in a child process: ``--side inspect``) -------------------------
def run_inspect_side(model_url: str, n: int, concurrency: int, log_dir: Path) -> dict[str, Any]:
    import random

    import pyspiel
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageTool, ChatMessageUser, get_model
    from inspect_ai.scorer import Score, Target, mean, scorer
    from inspect_ai.solver import Generate, TaskState, solver
    from inspect_ai.tool import ToolInfo, ToolParam, ToolParams

    game = pyspiel.load_game("tic_tac_toe")
    play_move = ToolInfo(
        name="play_move",
        description="Play one legal move, given by its action id.",
        parameters=ToolParams(
            properties={"action_id": ToolParam(type="integer", description="a legal action")},
            required=["action_id"],
        ),
    )

    def show(state: Any) -> str:
        if state.is_terminal():
            return "The game is over."
        legal = ", ".join(str(a) for a in state.legal_actions())
        return f"Board:\n{state}\nLegal actions: {legal}"

    @solver
    def play_tic_tac_toe() -> Any:
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            seed = int(state.metadata["seed"])
            rng = random.Random(seed)
            board = game.new_initial_state()
            model = get_model()
            state.messages = [
                ChatMessageUser(
                    content="Game: tic_tac_toe. You play X (player 0) against a random "
                    f"opponent.\n{show(board)}\nCall play_move with the action_id of your move."
                )
            ]
            reward = -1.0  # an illegal or missing move loses
            for _ in range(9):
                output = await model.generate(state.messages, tools=[play_move])
                state.messages.append(output.message)
                calls = output.message.tool_calls or []
                action = calls[0].arguments.get("action_id") if calls else None
                if action not in board.legal_actions():
                    break
                board.apply_action(action)
                if not board.is_terminal():
                    board.apply_action(rng.choice(board.legal_actions()))
                state.messages.append(
                    ChatMessageTool(
                        content=f"You played {action}.\n{show(board)}",
                        tool_call_id=calls[0].id,
                        function="play_move",
                    )
                )
                if board.is_terminal():
                    reward = float(board.returns()[0])
                    break
            state.metadata["reward"] = reward
            return state

        return solve

    @scorer(metrics=[mean()])
    def game_reward() -> Any:
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=state.metadata["reward"])

        return score

    task = Task(
        dataset=[Sample(input="play", id=i, metadata={"seed": i}) for i in range(n)],
        solver=play_tic_tac_toe(),
        scorer=game_reward(),
    )
    started = time.perf_counter()
    logs = inspect_eval(
        task,
        model="openai/bench-model",
        model_base_url=model_url,
        # the chat-completions API, which the test server speaks (inspect's default for
        # the openai provider is the Responses API)
        model_args={"responses_api": False},
        max_connections=concurrency,
        max_samples=concurrency,
        log_dir=str(log_dir),
        display="none",
        log_level="error",
    )
    loop_s = time.perf_counter() - started
    if logs[0].status != "success":
        error = logs[0].error.message if logs[0].error else ""
        raise SystemExit(f"the inspect eval ended {logs[0].status}: {error}")
    samples = logs[0].samples or []
    rewards = [float(s.metadata.get("reward", 0.0)) for s in samples]
    return {"loop_s": loop_s, "rewards": rewards, "status": logs[0].status}


# -- orchestration ------------------------------------------------------------------------
def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds of one command (its processes, waited for)."""
    env = {**user_env("OPENAI_", "ANTHROPIC_"), "OPENAI_API_KEY": "not-needed"}
    before = cpu_children()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, cpu_children() - before, done


def figures_of(done: subprocess.CompletedProcess[str], side: str) -> dict[str, Any]:
    marker = [ln for ln in done.stdout.splitlines() if ln.startswith("FIGURES ")]
    if done.returncode != 0 or not marker:
        raise SystemExit(f"{side} side failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return json.loads(marker[-1][len("FIGURES ") :])


def plugin_rewards(folder: Path) -> list[float]:
    rewards = []
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / name
        if path.exists():
            rewards += [json.loads(line)["reward"] for line in path.read_text().splitlines()]
    return rewards


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


class Side:
    def __init__(self, label: str) -> None:
        self.label = label
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.server_cpu: list[float] = []
        self.rewards: list[float] = []


def run_plugin(side: Side, folder: Path, args: argparse.Namespace, extra: list[str]) -> None:
    from servers.openai_compat import serve_openai

    out = folder / f"plugin-{len(side.wall)}-{abs(hash(side.label))}"
    with serve_openai(delay=args.delay) as server:
        own = cpu_self()
        wall, cpu, done = timed(
            [
                *PYTEST_QUIET,
                "--openenv-env=openspiel:tic_tac_toe",
                f"--openenv-n={args.n}",
                f"--openenv-llm-endpoint={server.base_url}",
                "--openenv-model=bench-model",
                f"--openenv-concurrency={args.concurrency}",
                f"--openenv-output={out}",
                *extra,
            ],
            folder,
        )
        side.server_cpu.append(cpu_self() - own)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest side failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    side.wall.append(wall)
    side.cpu.append(cpu)
    side.rewards = plugin_rewards(out)


def run_peer(side: Side, folder: Path, args: argparse.Namespace, script: Path, *argv: str) -> None:
    """One round of a peer: its own process against a fresh model server, timed; the
    server's CPU is counted apart (it is this process's, not the peer's)."""
    from servers.openai_compat import serve_openai

    with serve_openai(delay=args.delay) as server:
        own = cpu_self()
        command = [sys.executable, str(script), f"--n={args.n}", *argv]
        wall, cpu, done = timed([*command, f"--model-url={server.base_url}"], folder)
        side.server_cpu.append(cpu_self() - own)
    figures = figures_of(done, side.label)
    side.wall.append(wall)
    side.cpu.append(cpu)
    side.rewards = figures["rewards"]


def run_inspect(side: Side, folder: Path, args: argparse.Namespace) -> None:
    run_peer(
        side,
        folder,
        args,
        HERE,
        "--side=inspect",
        f"--concurrency={args.concurrency}",
        f"--log-dir={folder / 'inspect-logs'}",
    )


def run_collect_runner(side: Side, folder: Path, args: argparse.Namespace, env_url: str) -> None:
    output = folder / f"openenv-collect-{len(side.wall)}"
    script = HERE.parent / "vs_openenv.py"
    run_peer(
        side, folder, args, script, "--side=openenv", f"--env-url={env_url}", f"--output={output}"
    )


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="episodes per side (default 200)")
    parser.add_argument("--concurrency", type=int, default=16, help="C (default 16)")
    parser.add_argument("--delay", type=float, default=0.05, help="model delay (default 0.05 s)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--side", choices=["inspect"], help=argparse.SUPPRESS)
    parser.add_argument("--model-url", help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side == "inspect":
        figures = run_inspect_side(args.model_url, args.n, args.concurrency, Path(args.log_dir))
        print("FIGURES " + json.dumps(figures), flush=True)
        return

    sys.path.insert(0, str(TESTS))
    ours, ours_server = Side("pytest-openenv"), Side("pytest-openenv --openenv-server")
    inspect = Side("inspect-ai") if installed("inspect_ai") else None
    collect = Side("OpenEnv CollectRunner") if installed("openenv") else None
    print(
        f"{args.n} tic-tac-toe episodes, an LLM policy at {args.delay * 1000:g} ms per "
        f"completion, concurrency {args.concurrency}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    if inspect is None:
        print("inspect-ai: not installed (pip install inspect-ai), left out")
    if collect is None:
        print("OpenEnv CollectRunner: the openenv package is not installed, left out")
    print(
        f"{'round':>5} {'side':<34} {'wall s':>7} {'CPU s':>7} {'server CPU s':>12} "
        f"{'wall ratio':>10} {'CPU ratio':>9}"
    )
    env_server: Any = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        try:
            if collect is not None:
                from servers.openenv_servers import ServerProcess

                env_server = ServerProcess("tictactoe", max_sessions=max(64, args.concurrency))
                env_server.__enter__()
            for round_ in range(args.repeat):
                run_plugin(ours, folder, args, [])
                if inspect is not None:
                    run_inspect(inspect, folder, args)
                if collect is not None:
                    run_plugin(ours_server, folder, args, [f"--openenv-server={env_server.url}"])
                    run_collect_runner(collect, folder, args, env_server.url)
                pairs = [(ours, None), (inspect, ours), (ours_server, None), (collect, ours_server)]
                for side, versus in pairs:
                    if side is None or not side.wall:
                        continue
                    ratio = f"{'':>10} {'':>9}"
                    if versus is not None:
                        wall_ratio = side.wall[-1] / versus.wall[-1]
                        ratio = f"{wall_ratio:>10.2f} {side.cpu[-1] / versus.cpu[-1]:>9.2f}"
                    print(
                        f"{round_:>5} {side.label:<34} {side.wall[-1]:>7.2f} {side.cpu[-1]:>7.2f} "
                        f"{side.server_cpu[-1]:>12.2f} {ratio}",
                        flush=True,
                    )
        finally:
            if env_server is not None:
                env_server.__exit__(None, None, None)
    print(
        "ratios: the peer's figure over pytest-openenv's in the same round (inspect-ai against "
        "the in-process run, CollectRunner against the run over the same OpenEnv server); "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )
    for side in (ours, inspect, ours_server, collect):
        if side is not None and side.rewards:
            print(f"reward mean, {side.label}: {mean(side.rewards):+.3f} over {len(side.rewards)}")


if __name__ == "__main__":
    main()
