"""Step 3: fine-tune the base checkpoint on the collected episodes with TRL's SFTTrainer.

    python train.py openenv-results/results.jsonl base/ student/

Each row of ``results.jsonl`` is one conversation (``messages`` in OpenAI chat format, tool
calls included) with its ``tools``; TRL renders both through the base's chat template and,
with ``assistant_only_loss``, trains on the assistant's turns alone (the template marks them
with ``{% generation %}``). Before training, one row is rendered and checked: every tool
call must come out with its arguments intact, and the prompt the policy will send at
evaluation must be a prefix of the training text, so the model learns the format it is
asked in. LoRA adapters (peft) keep the optimizer small; they are merged into the weights
at the end, so ``student/`` is a plain checkpoint folder like ``base/``. ``--lora-rank 0``
trains every weight instead (a 135M model's optimizer state is about 1 GB; give it a
learning rate near 1e-4, not LoRA's 1e-3). ``--symmetries`` trains on each tic-tac-toe
game's eight turned and mirrored images (``symmetries.py``) instead of the game alone.
``--context last-observation`` gives the student ``chat_template_last_observation.jinja``,
which shows the model the latest observation and nothing before it, and trains on one row
per decision (a game's prefix up to each of its moves), each distinct row once.
``--precision auto`` (the default) trains under bfloat16 autocast only on hardware that
multiplies bfloat16 natively (a CUDA device that supports it, a CPU with AVX512-BF16 or AMX)
and in float32 elsewhere; the closing JSON line says which (``precision``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: --context value -> the chat template the student is trained and saved with (None: the
#: base's own)
CONTEXT_TEMPLATES = {
    "full": None,
    "last-observation": HERE / "chat_template_last_observation.jinja",
}


#: /proc/cpuinfo flags of an x86 CPU that multiplies bfloat16 natively; without them torch
#: emulates it, and a training step took 115 s under bfloat16 against 6 s in float32
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
PRECISIONS = ("auto", "bf16", "fp32")


def cpu_has_native_bf16(cpuinfo: str) -> bool:
    """Whether ``cpuinfo`` (the text of /proc/cpuinfo) lists AVX512-BF16 or AMX-BF16 among
    a processor's flags."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags" and NATIVE_BF16_FLAGS & set(value.split()):
            return True
    return False


def choose_precision(asked: str, *, cpuinfo: str, cuda_bf16: bool | None) -> tuple[str, str]:
    """(``bf16`` or ``fp32``, why) for ``--precision asked``.

    ``cuda_bf16``: None where training runs on the CPU, else whether the CUDA device
    supports bfloat16; ``cpuinfo``: the text of /proc/cpuinfo ("" where there is none).
    """
    if cuda_bf16 is not None:
        has = "supports" if cuda_bf16 else "does not support"
        hardware, native = f"the CUDA device {has} bfloat16", cuda_bf16
    elif cpu_has_native_bf16(cpuinfo):
        hardware, native = "the CPU has AVX512-BF16 or AMX", True
    else:
        hardware, native = "the CPU has neither AVX512-BF16 nor AMX: bfloat16 is emulated", False
    if asked == "auto":
        return ("bf16" if native else "fp32"), f"auto: {hardware}"
    return asked, f"--precision {asked}; {hardware}"


def read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: no flags to read, so no bfloat16 assumed
        return ""


def no_activation_checkpointing(config_class: type) -> dict[str, bool]:
    """The keyword that turns activation checkpointing off: ``activation_checkpointing``
    where transformers has it (5.x warns that ``gradient_checkpointing`` goes in v6)."""
    names = {field.name for field in dataclasses.fields(config_class)}
    name = (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else "gradient_checkpointing"
    )
    return {name: False}


def load_rows(path: Path, limit: int | None, symmetries: bool = False) -> Any:
    from datasets import Dataset, load_dataset

    dataset = load_dataset("json", data_files=str(path), split="train")
    dataset = dataset.select_columns(["messages", "tools"])
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    if symmetries:
        from symmetries import NotTicTacToe, images

        try:
            rows = [
                turned
                for number, row in enumerate(dataset, 1)
                for turned in images(row, f"{path} row {number}")
            ]
        except NotTicTacToe as exc:
            sys.exit(f"--symmetries: {exc}")
        # the trainer shuffles, so a game's eight images do not arrive in one batch
        dataset = Dataset.from_list(rows, features=dataset.features)
    return dataset


#: --decision-copies value -> how many rows a decision the teacher made n times gets
DECISION_COPIES = {
    "one": lambda n: 1,
    "log2": lambda n: 1 + int(math.log2(n)),
}


def one_row_per_decision(dataset: Any, tokenizer: Any, copies: str = "one") -> tuple[Any, int]:
    """Each game's prefixes that end at one of its moves, each distinct rendering once
    (``copies="one"``) or ``1 + log2(n)`` times for a rendering met in n games (``"log2"``).

    Under a template that shows only the latest observation, a whole game would train its
    last move alone; a prefix per move trains every move. The same position reached in many
    games renders to the same text. Kept once, the opening, which every game shares, does
    not outweigh the positions that decide a game; but then the few positions every game
    passes through weigh no more than one a single game reached, and ``log2`` gives them a
    few rows more without letting them drown the rest. Returns the rows and the number of
    decisions before duplicates were dropped.
    """
    from datasets import Dataset

    found: dict[str, tuple[dict[str, Any], int]] = {}
    decisions = 0
    for row in dataset:
        for end, message in enumerate(row["messages"], 1):
            if message["role"] != "assistant":
                continue
            decisions += 1
            prefix = {"messages": row["messages"][:end], "tools": row["tools"]}
            text = tokenizer.apply_chat_template(
                prefix["messages"], tools=prefix["tools"], tokenize=False
            )
            first, times = found.get(text, (prefix, 0))
            found[text] = (first, times + 1)
    count = DECISION_COPIES[copies]
    rows = [prefix for prefix, times in found.values() for _ in range(count(times))]
    return Dataset.from_list(rows, features=dataset.features), decisions


def check_rendering(tokenizer: Any, row: dict[str, Any], last_move_only: bool = False) -> None:
    """Exit unless the template renders this row's tool calls and the eval prompt intact.

    ``last_move_only``: the template shows the latest turn alone, so only the row's last
    move must come out.
    """
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    moves = [message for message in row["messages"] if message["role"] == "assistant"]
    calls = [
        call["function"]["arguments"]
        for message in (moves[-1:] if last_move_only else moves)
        for call in message.get("tool_calls") or []
    ]
    for arguments in calls:
        shown = json.dumps(json.loads(arguments) if isinstance(arguments, str) else arguments)
        if f'"arguments": {shown}' not in text:
            sys.exit(
                f"the chat template does not render the tool call arguments {arguments!r} "
                "intact; train with a template that shows tool calls (chat_template.jinja here)"
            )
    if '"arguments": "' in text:
        sys.exit("the chat template double-encodes tool-call arguments; see chat_template.jinja")
    # TRL probes a template with a made-up user-assistant-user exchange, which the
    # last-observation template renders without its assistant turn, and then warns that
    # the end-of-turn token is not trained; this row's own mask is the answer that counts
    rendered = tokenizer.apply_chat_template(
        row["messages"],
        tools=row["tools"],
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    trained = [
        token
        for token, mask in zip(rendered["input_ids"], rendered["assistant_masks"], strict=True)
        if mask
    ]
    if not tokenizer.decode(trained).rstrip().endswith("<|im_end|>"):
        sys.exit(
            "the chat template leaves the end of the assistant's turn (<|im_end|>) out of "
            "its {% generation %} block: the student would not learn to stop"
        )
    ends = [end for end, message in enumerate(row["messages"]) if message["role"] == "assistant"]
    for end in ends[-1:] if last_move_only else ends:
        prompt = tokenizer.apply_chat_template(
            row["messages"][:end], tools=row["tools"], add_generation_prompt=True, tokenize=False
        )
        if not text.startswith(prompt):
            sys.exit(
                f"the prompt before move {end} is not a prefix of the training text: the "
                "model would be trained on a format it is not asked in; check the template"
            )


def train(args: argparse.Namespace) -> None:
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(args.seed)
    cuda_bf16 = torch.cuda.is_bf16_supported() if torch.cuda.is_available() else None
    precision, why = choose_precision(args.precision, cpuinfo=read_cpuinfo(), cuda_bf16=cuda_bf16)
    print(f"precision: {precision} ({why})", flush=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(args.base)
    model = AutoModelForCausalLM.from_pretrained(args.base, dtype=torch.float32)
    dataset = load_rows(args.dataset, args.rows, args.symmetries)
    template = CONTEXT_TEMPLATES[args.context]
    decisions = None
    if template is not None:
        # saved with the student, so its evaluation renders prompts the way training did
        tokenizer.chat_template = template.read_text(encoding="utf-8")
        games = len(dataset)
        dataset, decisions = one_row_per_decision(dataset, tokenizer, args.decision_copies)
        print(
            f"{games} games, {decisions} decisions, {len(dataset)} rows "
            f"({args.decision_copies} per distinct decision)"
        )
    check_rendering(tokenizer, dataset[0], last_move_only=template is not None)
    check_rendering(tokenizer, dataset[len(dataset) - 1], last_move_only=template is not None)
    with tempfile.TemporaryDirectory(prefix="sft-warmup-") as scratch:
        config = SFTConfig(
            output_dir=scratch,
            num_train_epochs=args.epochs,
            max_steps=args.max_steps,
            per_device_train_batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            lr_scheduler_type=args.lr_schedule,
            warmup_steps=0,
            logging_steps=5,
            save_strategy="no",
            report_to=[],
            assistant_only_loss=True,
            max_length=args.max_length,
            use_cpu=not torch.cuda.is_available(),
            dataloader_num_workers=0,
            seed=args.seed,
            disable_tqdm=True,
            # recomputing activations saves memory a 135M model does not need, at a third
            # more compute (TRL turns it on by default)
            **no_activation_checkpointing(SFTConfig),
            # bfloat16 autocast: on a CPU with AVX512-BF16 or AMX the matrix products run at
            # about twice the float32 rate; the merged student is saved in float32 either way
            bf16=precision == "bf16",
        )
        lora = (
            LoraConfig(
                r=args.lora_rank,
                lora_alpha=2 * args.lora_rank,
                lora_dropout=0.0,
                target_modules="all-linear",
                task_type="CAUSAL_LM",
            )
            if args.lora_rank
            else None
        )
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=lora,
        )
        result = trainer.train()
    merged = trainer.model.merge_and_unload() if lora is not None else trainer.model
    args.out.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    print(
        json.dumps(
            {
                "rows": len(dataset),
                "precision": precision,
                **({"decisions": decisions} if decisions is not None else {}),
                "steps": result.global_step,
                "first_loss": losses[0] if losses else None,
                "last_loss": losses[-1] if losses else None,
                "train_runtime_s": round(result.metrics.get("train_runtime", 0.0), 1),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="results.jsonl from the collection run")
    parser.add_argument("base", type=Path, help="the base checkpoint folder (prepare_base.py)")
    parser.add_argument("out", type=Path, help="folder for the student checkpoint")
    parser.add_argument("--rows", type=int, default=None, help="train on the first N rows")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after N steps")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument(
        "--lr-schedule",
        choices=("constant", "linear", "cosine"),
        default="constant",
        help="the learning rate over the run: held, or decayed to zero by the last step",
    )
    parser.add_argument(
        "--lora-rank", type=int, default=16, help="LoRA adapters of this rank; 0: every weight"
    )
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="bf16: bfloat16 autocast (fp32 weights kept); fp32; auto: bf16 only on a CUDA "
        "device that supports it or a CPU with AVX512-BF16 or AMX",
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
        help="tic-tac-toe: train on each game's eight turned and mirrored images (8x the rows)",
    )
    parser.add_argument(
        "--context",
        choices=sorted(CONTEXT_TEMPLATES),
        default="full",
        help="what the student sees at each turn: the whole conversation (the base's template)"
        " or the latest observation alone (one training row per distinct decision)",
    )
    parser.add_argument(
        "--decision-copies",
        choices=sorted(DECISION_COPIES),
        default="one",
        help="with --context last-observation: rows per distinct decision, one, or 1 + log2 of "
        "the number of games that reached it (the positions every game passes through count more)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    train(args)
    print(f"wrote {args.out} in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
