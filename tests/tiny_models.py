"""Tiny Llama checkpoints for the transformers policy's tests: SmolLM2's architecture
(``LlamaForCausalLM``) at a few thousand parameters, with a byte-level BPE tokenizer trained
on the spot and a chat template, saved to a folder as ``save_pretrained`` writes one.

``random_checkpoint`` is randomly initialised: it babbles, which is what a sampling or
token-limit test needs. ``taught_checkpoint`` is trained for a few seconds until, for each
given prompt, its greedy reply is the given text: a real model emitting each tool-call
format, so the whole path (template, generation, decoding, parsing) runs for real.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: the example's tool-calling template (ChatML with <tool_call> blocks)
HERMES_TEMPLATE = (ROOT / "example_suites" / "sft_warmup" / "chat_template.jinja").read_text()
#: SmolLM2's own template: it renders neither the tools nor the assistant's tool calls
PLAIN_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "(message['content'] or '') + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|python_tag|>"]
TOOL = {
    "type": "function",
    "function": {
        "name": "play_move",
        "description": "Play one legal move, given by its action id.",
        "parameters": {
            "type": "object",
            "properties": {"action_id": {"type": "integer"}},
            "required": ["action_id"],
        },
    },
}


@dataclass(frozen=True)
class Lesson:
    """For this conversation, the model's greedy reply must be ``reply``."""

    messages: list[dict[str, Any]]
    reply: str
    tools: Sequence[dict[str, Any]] = (TOOL,)


def _tokenizer(corpus: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|python_tag|>"],
    )


def _model(tokenizer: Any, *, window: int, seed: int) -> Any:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=window,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def _prompt(lesson: Lesson, template: str) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[lesson.messages],
        tools=list(lesson.tools),
        chat_template=template,
        add_generation_prompt=True,
    )
    return rendered[0]


def random_checkpoint(
    folder: Path, *, template: str | None = HERMES_TEMPLATE, window: int = 2048, seed: int = 0
) -> Path:
    corpus = [HERMES_TEMPLATE, PLAIN_TEMPLATE, "Board: 0 | 1 | 2 Legal actions: 0, 1, 2"]
    tokenizer = _tokenizer(corpus)
    if template is not None:
        tokenizer.chat_template = template
    _model(tokenizer, window=window, seed=seed).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def taught_checkpoint(
    folder: Path, lessons: list[Lesson], *, template: str = HERMES_TEMPLATE, steps: int = 400
) -> Path:
    """A model that answers each lesson's conversation with its reply, greedily."""
    import torch

    prompts = [_prompt(lesson, template) for lesson in lessons]
    tokenizer = _tokenizer([*prompts, *(lesson.reply for lesson in lessons), template])
    tokenizer.chat_template = template
    model = _model(tokenizer, window=2048, seed=0)
    sequences, masks = [], []
    for prompt, lesson in zip(prompts, lessons, strict=True):
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        reply_ids = tokenizer(lesson.reply + tokenizer.eos_token, add_special_tokens=False)[
            "input_ids"
        ]
        sequences.append(prompt_ids + reply_ids)
        masks.append([0] * len(prompt_ids) + [1] * len(reply_ids))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    # a model this small gains nothing from a second thread, and under xdist (or beside
    # other jobs) two threads per process spin against each other: ten times slower here
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _memorise(model, optimizer, sequences, masks, steps)
    finally:
        torch.set_num_threads(threads)
    model.eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _memorise(
    model: Any, optimizer: Any, sequences: list[list[int]], masks: list[list[int]], steps: int
) -> None:
    import torch

    for _ in range(steps):
        worst = 0.0
        for ids, mask in zip(sequences, masks, strict=True):
            inputs = torch.tensor([ids])
            labels = torch.tensor([[t if m else -100 for t, m in zip(ids, mask, strict=True)]])
            loss = model(input_ids=inputs, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            worst = max(worst, loss.item())
        if worst < 0.005:  # every reply is memorised: greedy decoding reproduces it
            break
