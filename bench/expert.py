"""The expert teacher (OpenSpiel's own search bots): its targets and its cost per move.

    python bench/expert.py [--n 2000] [--workers 8]

Prints, all measured in this one run:
  1. pytest's own cost per item (N trivial parametrized tests, wall time / N);
  2. the expert's cost per move, in process (``OpenSpielFamily.expert_call`` alone:
     state rebuild + search), for tic-tac-toe (exact alpha-beta, memo empty at start)
     and connect four (C++ MCTS), and its ratio to (1);
  3. the MCTS budget: connect four vs a random opponent for several simulation
     counts, wins within 21 and within 10 agent moves, and ms per move;
  4. the targets through pytest itself: tic-tac-toe vs random (200 episodes, 100%
     pass), the headline command with ``--openenv-policy=expert`` (exit 0), connect
     four vs random (>= 95% pass), expert vs expert tic-tac-toe (all draws).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchenv import PYTEST_QUIET, user_env

from pytest_openenv.envs.openspiel import expert as openspiel_expert
from pytest_openenv.envs.registry import build_family

ENV = user_env()
#: an explicit limit below a connect-four game's 21 moves a player, to show what it costs
C4_SHORT = "--openenv-max-turns=10"


def trivial_run_seconds(n: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "test_trivial.py").write_text(
            "import pytest\n\n"
            f"@pytest.mark.parametrize('i', range({n}))\n"
            "def test_item(i):\n    assert i >= 0\n"
        )
        start = time.perf_counter()
        subprocess.run(
            [*PYTEST_QUIET, "test_trivial.py"],
            cwd=folder,
            env=ENV,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        return time.perf_counter() - start


def pytest_per_item_ms(n: int) -> tuple[float, float]:
    """pytest's cost per item: wall time / N (as bench/overhead.py), and per extra item
    (start-up taken out: (T(N) - T(1)) / (N - 1))."""
    whole, one = trivial_run_seconds(n), trivial_run_seconds(1)
    return 1000 * whole / n, 1000 * max(whole - one, 0.0) / (n - 1)


def expert_games(
    env: str, episodes: int, config: dict[str, Any] | None = None
) -> tuple[list[float], list[int], float]:
    """Expert vs the env's opponent, in process: (rewards, agent moves, seconds in expert_call)."""
    family = build_family(env, config or {})
    rewards, moves, spent = [], [], 0.0
    for seed in range(episodes):
        backend = family.embedded_backend()
        current = backend.reset(seed=seed, episode_id=f"ep-{seed:06d}")
        total, count = float(current.reward or 0.0), 0
        while not current.done:
            start = time.perf_counter()
            call = family.expert_call(current, seed=seed)
            spent += time.perf_counter() - start
            assert call is not None
            current = backend.step(family.to_action(call, current))
            total += float(current.reward or 0.0)
            count += 1
        rewards.append(total)
        moves.append(count)
    return rewards, moves, spent


def run_plugin(args: list[str]) -> tuple[int, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [*PYTEST_QUIET, *args],
            cwd=folder,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        summary_path = Path(folder) / "openenv-results" / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        rows = []
        for name in ("results.jsonl", "failures.jsonl"):
            path = Path(folder) / "openenv-results" / name
            if path.exists():
                rows += [json.loads(line) for line in path.read_text().splitlines() if line]
        summary["rows"] = rows
        return done.returncode, summary


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000, help="trivial items for pytest's cost")
    parser.add_argument("--workers", type=int, default=8, help="-n of the headline command")
    args = parser.parse_args()

    item_ms, marginal_ms = pytest_per_item_ms(args.n)
    print(
        f"pytest's own cost per item ({args.n} trivial items): {item_ms:.3f} ms "
        f"(wall / N), {marginal_ms:.3f} ms per extra item (start-up taken out)"
    )

    print("\nexpert cost per move, in process (expert_call: rebuild + search)")
    for env, episodes in (("openspiel:tic_tac_toe", 200), ("openspiel:connect_four", 100)):
        rewards, moves, spent = expert_games(env, episodes)
        per_move = 1000 * spent / sum(moves)
        plan = build_family(env, {}).expert.plan.kind
        print(
            f"  {env:24s} {plan:10s} {episodes} games, {sum(moves)} moves: "
            f"{per_move:.3f} ms/move = {per_move / item_ms:.2f} x pytest's per-item cost "
            f"({per_move / marginal_ms:.2f} x per extra item)"
        )

    chosen = openspiel_expert.MCTS_SIMULATIONS
    print(f"\nMCTS budget, connect four vs random, 100 games (chosen: {chosen})")
    try:
        for simulations in (10, 25, 50, 100, 200):
            openspiel_expert.MCTS_SIMULATIONS = simulations
            rewards, moves, spent = expert_games("openspiel:connect_four", 100)
            wins = sum(r > 0 for r in rewards)
            quick = sum(r > 0 and m <= 10 for r, m in zip(rewards, moves, strict=True))
            print(
                f"  {simulations:4d} simulations: wins {wins}% (within 10 moves {quick}%), "
                f"{1000 * spent / sum(moves):.3f} ms/move"
            )
    finally:
        openspiel_expert.MCTS_SIMULATIONS = chosen

    print("\ntargets, through pytest")
    ttt, expert = "--openenv-env=openspiel:tic_tac_toe", "--openenv-policy=expert"
    code, summary = run_plugin([ttt, expert, "--openenv-n=200", "-n", "0"])
    figures = summary.get("figures", {})
    losses = sum(row["reward"] < 0 for row in summary["rows"])
    print(
        f"  tic-tac-toe vs random, 200 episodes: pass rate {figures.get('pass_rate')}, "
        f"losses {losses}, exit {code}  (target: 100%, exit 0)"
    )
    code, summary = run_plugin([ttt, "--openenv-n=200", "-n", str(args.workers), expert])
    print(
        f"  headline `pytest {ttt} --openenv-n=200 -n {args.workers} {expert}`: exit {code}, "
        f"pass rate {summary.get('figures', {}).get('pass_rate')}  (target: exit 0)"
    )
    c4 = "--openenv-env=openspiel:connect_four"
    for turns in ([], [C4_SHORT]):
        code, summary = run_plugin([c4, expert, "--openenv-n=100", *turns, "-n", "0"])
        label = turns[0] if turns else "default turn limit (21 for connect four)"
        print(
            f"  connect four vs random, 100 episodes, {label}: pass rate "
            f"{summary.get('figures', {}).get('pass_rate')}  (target >= 0.95)"
        )
    duel = ["--openenv-env-config", '{"opponent": "expert"}']
    code, summary = run_plugin([ttt, expert, *duel, "--openenv-n=200", "-n", "0"])
    draws = sum(row["reward"] == 0 for row in summary["rows"])
    print(
        f"  expert vs expert tic-tac-toe, 200 episodes: {draws} draws, exit {code}  (target: 200)"
    )


if __name__ == "__main__":
    main()
