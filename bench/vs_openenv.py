"""pytest-openenv vs OpenEnv's own collector, on the same server and model, in one run.

    python bench/vs_openenv.py [--n 100] [--delay 0.05] [--concurrency 16]

Starts, each in its own process on 127.0.0.1:
  - a real OpenEnv tic-tac-toe server (``openenv`` package, OpenEnv's openspiel schema,
    random opponent seeded by the episode seed): ``tests/servers/openenv_servers.py``;
  - the suite's OpenAI-compatible test server with a fixed per-completion delay
    (``tests/servers/openai_compat.py``; its "model" plays the first legal action).

Then collects N episodes twice:
  A. OpenEnv: ``CollectRunner`` with ``StepEnvSessionAdapter`` over ``GenericEnvClient`` and
     ``build_model_step`` over ``OpenAIClient`` (OpenEnv's collector runs episodes one by one);
  B. ``pytest --openenv-server ... --openenv-llm-endpoint ... --openenv-concurrency C``.

Both sides are whole commands in fresh processes (imports included). Printed: both wall
times and their ratio (target >= 10x), the same figures for the collection loops alone
(``CollectRunner.run`` vs the plugin's in-session wall time), and both reward means and
distributions (target: the same).
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchenv import PYTEST_QUIET, user_env

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SYSTEM_PROMPT = (
    "You are playing a game. On each turn call the play_move tool with the action_id of one "
    "legal action. Play to win; avoid losing."
)


# -- side A: OpenEnv's collector (run in a child process: ``--side openenv``) ---------------
def run_openenv_side(env_url: str, model_url: str, n: int, output: Path) -> dict[str, Any]:
    """Collect with OpenEnv's own harness; what the run measured, as JSON-ready data."""
    from openenv.core.env_server.mcp_types import Tool
    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.harness.collect import CollectRunner, RolloutSerializer, build_model_step
    from openenv.core.harness.rollout import (
        HarnessRunLimits,
        MCPHarnessAdapter,
        ResourceSessionFactory,
        StepEnvSessionAdapter,
        ToolResult,
    )
    from openenv.core.llm_client import OpenAIClient

    tool = Tool(
        name="play_move",
        description="Play one legal move, given by its action id.",
        input_schema={
            "type": "object",
            "properties": {"action_id": {"type": "integer"}},
            "required": ["action_id"],
        },
    )

    def show(observation: dict[str, Any], done: bool) -> str:
        if done:
            return "The game is over."
        legal = ", ".join(str(a) for a in observation.get("legal_actions") or [])
        return f"Legal actions: {legal}"

    def initial_messages(result: Any, task: Any) -> list[dict[str, Any]]:
        text = (
            "Game: tic_tac_toe. You play X (player 0) against a random opponent.\n"
            f"{show(result.observation, result.done)}\n"
            "Call play_move with the action_id of your move."
        )
        return [{"role": "user", "content": text}]

    def tool_result(name: str, arguments: dict[str, Any], result: Any, state: Any) -> ToolResult:
        played = f"You played {arguments.get('action_id')}."
        return ToolResult(
            data=f"{played}\n{show(result.observation, result.done)}",
            done=bool(result.done),
            metadata={"reward": result.reward},
        )

    class TicTacToeSessions(ResourceSessionFactory):
        def create(self, task: Any, seed: int | None = None, episode_id: str | None = None):
            return StepEnvSessionAdapter(
                GenericEnvClient(base_url=env_url),
                task=task,
                seed=int(task),  # episode i plays seed i, as the plugin's episode i does
                episode_id=episode_id,
                tool_specs=[tool],
                action_builder=lambda name, args: {
                    "action_id": args["action_id"],
                    "game_name": "tic_tac_toe",
                    "game_params": {},
                },
                initial_messages_builder=initial_messages,
                tool_result_builder=tool_result,
            )

    runner = CollectRunner(
        session_factory=TicTacToeSessions(),
        harness_adapter=MCPHarnessAdapter(),
        serializer=RolloutSerializer(output),
        tasks=range(n),
        limits=HarnessRunLimits(max_turns=10),
    )
    model_step = build_model_step(
        OpenAIClient(model_url, None, model="fake", api_key="not-needed", temperature=0.2),
        system_prompt=SYSTEM_PROMPT,
    )
    started = time.perf_counter()
    result = runner.run(model_step=model_step, num_episodes=n, resume=False)
    loop_s = time.perf_counter() - started
    rewards = [
        json.loads(line)["reward"]
        for line in (output / "results.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return {"loop_s": loop_s, "rewards": rewards, "failed": result.num_failed}


# -- orchestration ------------------------------------------------------------------------
def start_model_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(TESTS / "servers" / "openai_compat.py"), "--delay", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip() if process.stdout else ""
    if not line.startswith("http"):
        process.kill()
        raise SystemExit(f"the OpenAI-compatible test server did not start: {line!r}")
    return process, line


def timed(command: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**user_env(), "OPENAI_API_KEY": "not-needed"}  # same for both sides
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, done


def distribution(rewards: list[float]) -> str:
    counts = collections.Counter(float(r) for r in rewards)
    return ", ".join(f"{r:+g}: {counts[r]}" for r in sorted(counts))


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="episodes per side (default 100)")
    parser.add_argument("--delay", type=float, default=0.05, help="model delay (default 0.05 s)")
    parser.add_argument("--concurrency", type=int, default=16, help="plugin C (default 16)")
    parser.add_argument("--side", choices=["openenv"], help=argparse.SUPPRESS)
    parser.add_argument("--env-url", help=argparse.SUPPRESS)
    parser.add_argument("--model-url", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.side == "openenv":
        figures = run_openenv_side(args.env_url, args.model_url, args.n, Path(args.output))
        print("FIGURES " + json.dumps(figures), flush=True)
        return

    sys.path.insert(0, str(TESTS))
    from servers.openenv_servers import ServerProcess

    model, model_url = start_model_server(args.delay)
    try:
        with (
            ServerProcess("tictactoe", max_sessions=max(64, args.concurrency)) as env,
            tempfile.TemporaryDirectory() as tmp,
        ):
            folder = Path(tmp)
            print(
                f"{args.n} tic-tac-toe episodes; OpenEnv server {env.url}; "
                f"model {model_url} ({args.delay * 1000:g} ms per completion)"
            )
            openenv_s, openenv_run = timed(
                [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--side=openenv",
                    f"--n={args.n}",
                    f"--env-url={env.url}",
                    f"--model-url={model_url}",
                    f"--output={folder / 'openenv-collect'}",
                ],
                folder,
            )
            marker = [ln for ln in openenv_run.stdout.splitlines() if ln.startswith("FIGURES ")]
            if openenv_run.returncode != 0 or not marker:
                raise SystemExit(f"OpenEnv side failed:\n{openenv_run.stderr[-3000:]}")
            openenv = json.loads(marker[-1][len("FIGURES ") :])

            plugin_s, plugin_run = timed(
                [
                    *PYTEST_QUIET,
                    "--openenv-env=openspiel:tic_tac_toe",
                    f"--openenv-n={args.n}",
                    f"--openenv-server={env.url}",
                    f"--openenv-llm-endpoint={model_url}",
                    "--openenv-model=fake",
                    f"--openenv-concurrency={args.concurrency}",
                    "--openenv-output=plugin-results",
                ],
                folder,
            )
            summary_path = folder / "plugin-results" / "summary.json"
            if plugin_run.returncode not in (0, 1) or not summary_path.exists():
                raise SystemExit(f"pytest side failed:\n{plugin_run.stdout[-3000:]}")
            figures = json.loads(summary_path.read_text())["figures"]
            plugin_rewards = []
            for name in ("results.jsonl", "failures.jsonl"):
                path = folder / "plugin-results" / name
                if path.exists():
                    plugin_rewards += [
                        json.loads(line)["reward"]
                        for line in path.read_text().splitlines()
                        if line.strip()
                    ]
    finally:
        model.kill()
        model.wait(timeout=10)

    print(
        f"OpenEnv CollectRunner (sequential):  {openenv_s:7.2f} s wall "
        f"(collection loop {openenv['loop_s']:.2f} s)"
    )
    print(
        f"pytest-openenv, C={args.concurrency}:              {plugin_s:7.2f} s wall "
        f"(episodes in session {figures['wall_time_s']:.2f} s)"
    )
    print(
        f"speed-up: {openenv_s / plugin_s:.1f}x wall, "
        f"{openenv['loop_s'] / figures['wall_time_s']:.1f}x collection loop (target >= 10x)"
    )
    print(
        f"reward mean: OpenEnv {mean(openenv['rewards']):+.3f} over {len(openenv['rewards'])} "
        f"episode(s) ({openenv['failed']} failed to run); pytest-openenv "
        f"{mean(plugin_rewards):+.3f} over {len(plugin_rewards)} episode(s) "
        f"({figures['errored']} errored)"
    )
    print(
        f"reward distribution: OpenEnv {{{distribution(openenv['rewards'])}}}; "
        f"pytest-openenv {{{distribution(plugin_rewards)}}}"
    )
    same = sorted(openenv["rewards"]) == sorted(plugin_rewards)
    print(f"same reward distribution: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
