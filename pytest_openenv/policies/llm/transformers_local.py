"""``--openenv-policy=transformers``: a local checkpoint run in-process, no server.

The way to gate a checkpoint just trained, in CI: the transcript goes through the
checkpoint's own chat template with the tools (``apply_chat_template``), the model
generates, and the tool calls are read from its text (``tool_text``). Worker side: each
pytest process loads the model once (``load``, at configure), so ``-n 2`` holds two copies.

- Sampling: ``--openenv-temperature`` 0 is greedy decoding; above 0 the process's torch
  generator is seeded per episode, repeat and turn, so a run samples alike every time and
  on any number of workers. ``--openenv-max-tokens`` bounds each reply.
- Concurrency: one generation at a time per process (a lock). With greedy decoding the
  turns of episodes in flight (``--openenv-concurrency``) that wait for the model are
  generated together, up to ``MAX_BATCH`` in one left-padded batch (``local_batch``): on CPU
  a small model's step costs much the same for 8 sequences as for one. Sampled turns, and a
  turn whose reply the context window would clip, are generated alone. Under xdist each
  worker takes its share of the cores (``torch.set_num_threads``).
- Prompts are encoded block by block through a ``PrefixStore`` that keeps earlier blocks,
  so a turn encodes only what the last one added (``prefix_cache``).
- A conversation longer than the model's context window ends the episode as a failure
  (``ContextExhausted``), like a server's HTTP 400 saying so; a generation that outlives
  ``--openenv-request-timeout`` or the episode's ``--openenv-timeout`` is an error.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import threading
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from ...config.convert import concurrency_ceiling
from ...config.settings import Settings
from ...errors import RenderTimeout
from ...util.render_bound import bounded_render
from ..base import ContextExhausted, Policy, PolicyUnavailable, Reply, ToolCall, Turn, Usage
from .checkpoint import Checkpoint, CheckpointProblem, find_checkpoint
from .deadline import seconds_left
from .local_batch import TurnBatcher, Waiting
from .openai_chat import sampling_seed
from .prefix_cache import PrefixStore, cache_argument, layer_tensors, supports_block_prefill
from .template_fit import TemplateFit, in_form, probe, render_with_transformers
from .tool_text import parse_tool_calls

if TYPE_CHECKING:
    from ...util.overload import OverloadSignal

EXTRA = "pip install 'pytest-openenv[transformers]'"
#: what the policy imports, by the name pip knows it under
NEEDED = {"torch": "torch", "transformers": "transformers"}
#: most turns in one batched generation: each sequence holds its own attention cache
#: (SmolLM2-135M: 46 KB a token, so 16 turns of 1,000 tokens take 0.7 GB)
MAX_BATCH = 16


@dataclass(frozen=True)
class LocalSampling:
    temperature: float
    max_tokens: int
    request_timeout: float
    timeout: float | None

    def cache_key(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens}


def turn_seed(turn: Turn) -> int:
    """The episode's sampling seed (``openai``'s), moved along per turn."""
    return (sampling_seed(turn) + 7_919 * turn.turn) % (2**31 - 1)


class TransformersPolicy(Policy):
    name: ClassVar[str] = "transformers"
    provider: ClassVar[str] = "transformers"

    def __init__(
        self,
        checkpoint: Checkpoint,
        sampling: LocalSampling,
        fit: TemplateFit | None,
        *,
        trust_remote_code: bool = False,
        batch: int = 1,
        dtype: str = "auto",
    ) -> None:
        """``batch``: most greedy turns generated together (the episodes a process keeps in
        flight, at most ``MAX_BATCH``); 1 generates each turn alone."""
        self.checkpoint = checkpoint
        #: ``--openenv-trust-remote-code``: given to transformers explicitly, never left to its
        #: interactive prompt (which ``pytest -s`` would show, and a "y" would run the code)
        self.trust_remote_code = trust_remote_code
        #: ``--openenv-model-dtype``: ``auto`` (float32 on CPU, the checkpoint's own on GPU)
        #: or a torch dtype's name
        self.dtype = dtype
        self.sampling = sampling
        self.model = checkpoint.spec
        #: None until loaded (the probe then runs on the real tokenizer)
        self.fit = fit
        #: the tokenizer and loading: a fast tokenizer shared between threads can fail
        #: ("Already borrowed")
        self._lock = threading.Lock()
        #: the model: one generation, alone or batched, at a time
        self._model_lock = threading.Lock()
        self.batcher = (
            TurnBatcher(min(batch, MAX_BATCH), self._model_lock, self._generate_batch)
            if batch > 1 and sampling.temperature <= 0
            else None
        )
        self._loaded: tuple[Any, Any, Any] | None = None  # torch, tokenizer, model
        self._load_error: str | None = None
        #: the loaded model's prompt blocks; None where blocks cannot be put together
        self.prefixes: PrefixStore | None = None

    # -- loading -------------------------------------------------------------
    def load(self, *, strict: bool) -> None:
        """Load tokenizer and model now, once per process; ``strict``: a failure is exit 4."""
        try:
            self._ensure_loaded()
        except PolicyUnavailable as exc:
            if strict:
                raise pytest.UsageError(str(exc)) from None

    def _ensure_loaded(self) -> tuple[Any, Any, Any]:
        with self._lock:
            if self._loaded is None:
                if self._load_error is not None:
                    raise PolicyUnavailable(self._load_error)
                try:
                    self._loaded = self._load()
                except PolicyUnavailable as exc:
                    self._load_error = str(exc)
                    raise
            return self._loaded

    def _load(self) -> tuple[Any, Any, Any]:
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise PolicyUnavailable(
                f"--openenv-policy=transformers needs torch and transformers ({exc}): {EXTRA}"
            ) from None
        share_cores_with_other_workers(torch)
        checkpoint = self.checkpoint
        options: dict[str, Any] = {"trust_remote_code": self.trust_remote_code}
        if checkpoint.gguf_file:
            options["gguf_file"] = checkpoint.gguf_file
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.dtype != "auto":
            dtype: Any = getattr(torch, self.dtype)
        else:
            # a checkpoint saved in half precision would decode slowly and differently
            # on a CPU without half-precision kernels: float32 there unless asked
            dtype = torch.float32 if device == "cpu" else "auto"
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint.source, **options)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                checkpoint.source, dtype=dtype, **options
            )
        except Exception as exc:
            raise PolicyUnavailable(
                f"--openenv-model={checkpoint.spec}: transformers could not load it "
                f"({type(exc).__name__}: {str(exc)[:400]})"
            ) from None
        model.to(device)
        model.eval()
        if not tokenizer.chat_template:
            tokenizer.chat_template = checkpoint.chat_template

        def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
            with bounded_render(f"the chat template of {self.model}"):
                return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)

        try:
            self.fit = probe(render)
        except RenderTimeout as exc:
            raise PolicyUnavailable(f"--openenv-model={checkpoint.spec}: {exc}") from None
        self.prefixes = (
            PrefixStore(cache_argument(model)) if supports_block_prefill(model) else None
        )
        return torch, tokenizer, model

    # -- one turn ------------------------------------------------------------
    def act(self, turn: Turn) -> Reply:
        torch, tokenizer, model = self._ensure_loaded()
        prompt = self._prompt(tokenizer, turn)
        with self._lock:
            ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")
        prompt_tokens = int(ids["input_ids"].shape[1])
        window = context_window(model)
        if window is not None and prompt_tokens >= window:
            raise ContextExhausted(
                f"the prompt is {prompt_tokens} tokens, the context window of {self.model} "
                f"is {window}"
            )
        max_new = self.sampling.max_tokens
        if window is not None:
            max_new = min(max_new, window - prompt_tokens)
        budget = self._budget(turn)
        started = time.monotonic()
        if self.batcher is not None and max_new == self.sampling.max_tokens:
            waiting = self.batcher.reply(
                Waiting(ids["input_ids"][0].tolist(), max_new, started + budget)
            )
            if isinstance(waiting.error, TimeoutError):
                raise PolicyUnavailable(self._out_of_time(budget, turn))
            if waiting.error is not None:
                raise waiting.error
            tokens = waiting.tokens or []
            elapsed = waiting.finished_at - started
        else:
            with self._model_lock:
                tokens = self._generate(torch, tokenizer, model, ids, turn, max_new, budget)
            elapsed = time.monotonic() - started
        stops = stop_ids(tokenizer, model)
        ended = next((i for i, token in enumerate(tokens) if token in stops), None)
        if ended is None and len(tokens) < max_new and elapsed >= budget:
            raise PolicyUnavailable(self._out_of_time(budget, turn))
        with self._lock:
            text = tokenizer.decode(tokens if ended is None else tokens[:ended])
        parsed = parse_tool_calls(text)
        calls = tuple(
            ToolCall(id=f"call_{turn.turn:03d}_{i}", name=call.name, arguments=call.arguments)
            for i, call in enumerate(parsed.calls)
        )
        return Reply(
            content=without_special_tokens(parsed.content, tokenizer),
            tool_calls=calls,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=len(tokens)),
        )

    def _prompt(self, tokenizer: Any, turn: Turn) -> str:
        """The transcript and tools through the chat template, ready for the reply."""
        fit = self.fit
        messages = in_form(turn.messages, fit.arguments_form if fit else None)
        try:
            with bounded_render(f"the chat template of {self.model}"):
                return str(
                    tokenizer.apply_chat_template(
                        messages,
                        tools=turn.tools or None,
                        add_generation_prompt=True,
                        tokenize=False,
                    )
                )
        except Exception as exc:  # the template raised (raise_exception) on this transcript
            raise PolicyUnavailable(
                f"the chat template of {self.model} cannot render this conversation "
                f"({type(exc).__name__}: {str(exc)[:300]})"
            ) from None

    def _config(self, model: Any, tokenizer: Any, max_new: int, budget: float) -> Any:
        config = copy.deepcopy(model.generation_config)
        config.max_new_tokens = max_new
        config.max_time = budget
        if config.pad_token_id is None:
            config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
        config.do_sample = self.sampling.temperature > 0
        if config.do_sample:
            config.temperature = self.sampling.temperature
        return config

    def _generate(
        self,
        torch: Any,
        tokenizer: Any,
        model: Any,
        ids: Any,
        turn: Turn | None,
        max_new: int,
        budget: float,
    ) -> list[int]:
        """One turn's new tokens (``turn`` seeds a sampled reply)."""
        config = self._config(model, tokenizer, max_new, budget)
        if config.do_sample and turn is not None:
            torch.manual_seed(turn_seed(turn))
        inputs = {key: value.to(model.device) for key, value in ids.items()}
        if self.prefixes is not None:
            started = time.monotonic()
            cache = self.prefixes.prefill(torch, model, inputs["input_ids"])
            if cache is not None:
                inputs[self.prefixes.cache_keyword] = cache
            # the blocks' time counts against the same budget as the reply's
            config.max_time = max(budget - (time.monotonic() - started), 0.001)
        with torch.inference_mode():
            output = model.generate(**inputs, generation_config=config)
        return list(output[0, inputs["input_ids"].shape[1] :].cpu().tolist())

    def _generate_batch(self, batch: Sequence[Waiting]) -> list[list[int]]:
        """Greedy turns together (``local_batch``).

        Each turn's whole blocks come from the prefix store, as they would alone; the
        batch then holds, row by row, its blocks' keys and values right-aligned in one
        cache and the rest of its prompt right-aligned after it, every gap masked. The
        positions generate derives from the mask are each row's own, so each row's
        attention sees what it would alone.
        """
        torch, tokenizer, model = self._ensure_loaded()
        budget = max(w.deadline for w in batch) - time.monotonic()
        if len(batch) == 1:  # alone: the lone turn's own path
            ids = torch.tensor([batch[0].ids])
            inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            return [self._generate(torch, tokenizer, model, inputs, None, batch[0].max_new, budget)]
        config = self._config(model, tokenizer, max(w.max_new for w in batch), budget)
        pad = int(config.pad_token_id)
        layers: list[list[tuple[Any, Any]]] = []
        for waiting in batch:
            cache = None
            if self.prefixes is not None:
                cache = self.prefixes.prefill(torch, model, torch.tensor([waiting.ids]))
            layers.append(layer_tensors(cache) if cache is not None else [])
        cached = [int(found[0][0].shape[2]) if found else 0 for found in layers]
        past = max(cached)
        rest = max(len(w.ids) - c for w, c in zip(batch, cached, strict=True))
        input_ids = torch.full((len(batch), past + rest), pad)
        mask = torch.zeros((len(batch), past + rest), dtype=torch.long)
        for row, (waiting, c) in enumerate(zip(batch, cached, strict=True)):
            tail = len(waiting.ids) - c
            input_ids[row, past - c : past] = torch.tensor(waiting.ids[:c], dtype=torch.long)
            input_ids[row, past + rest - tail :] = torch.tensor(waiting.ids[c:])
            mask[row, past - c : past] = 1
            mask[row, past + rest - tail :] = 1
        inputs: dict[str, Any] = {
            "input_ids": input_ids.to(model.device),
            "attention_mask": mask.to(model.device),
        }
        if past and self.prefixes is not None:
            inputs[self.prefixes.cache_keyword] = padded_cache(torch, layers, cached, past)
        # the rows' prefills count against the same deadlines as their replies
        config.max_time = max(max(w.deadline for w in batch) - time.monotonic(), 0.001)
        with torch.inference_mode():
            output = model.generate(**inputs, generation_config=config)
        stops = stop_ids(tokenizer, model)
        # a finished row goes on with padding until the batch's longest reply ends: each
        # keeps what it would get alone, up to and with its end token
        return [
            through_first_stop(tokens[: w.max_new], stops)
            for tokens, w in zip(output[:, past + rest :].cpu().tolist(), batch, strict=True)
        ]

    def _budget(self, turn: Turn) -> float:
        """Seconds this generation may take: the request bound, or what the episode has left."""
        return seconds_left(turn, self.sampling.request_timeout, self.sampling.timeout)

    def _out_of_time(self, budget: float, turn: Turn) -> str:
        if budget < self.sampling.request_timeout:
            why = f"the episode's --openenv-timeout={self.sampling.timeout:g}s budget ran out"
        else:
            why = f"--openenv-request-timeout={self.sampling.request_timeout:g}s"
        return f"{self.model} did not finish its reply in {turn.episode_id} ({why})"

    # -- records -------------------------------------------------------------
    def cache_identity(self) -> tuple[str, dict[str, Any]]:
        # ``auto`` stays out of the key, so caches written before the option existed
        # (which all loaded as ``auto`` does) still answer
        dtype = {} if self.dtype == "auto" else {"dtype": self.dtype}
        return self.provider, {
            **self.sampling.cache_key(),
            **dtype,
            "checkpoint": self.checkpoint.fingerprint(),
        }

    def describe(self) -> dict[str, Any]:
        fit = self.fit
        return {
            "policy": self.name,
            "model": self.model,
            **self.sampling.cache_key(),
            "gguf_file": self.checkpoint.gguf_file,
            "dtype": self.dtype,
            "tool_call_arguments": fit.arguments_form if fit else None,
        }

    def close(self) -> None:
        with self._model_lock, self._lock:
            self._loaded = None
            if self.prefixes is not None:
                self.prefixes.clear()


def context_window(model: Any) -> int | None:
    window = getattr(model.config, "max_position_embeddings", None)
    return int(window) if isinstance(window, int) and window > 0 else None


def stop_ids(tokenizer: Any, model: Any) -> set[int]:
    """The ids that end a reply: the generation config's end tokens and the tokenizer's."""
    found: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            found.add(value)
        elif isinstance(value, (list, tuple)):
            found.update(v for v in value if isinstance(v, int))
    return found


def padded_cache(
    torch: Any, layers: list[list[tuple[Any, Any]]], cached: list[int], past: int
) -> Any:
    """One cache for a batch: each row's keys and values right-aligned in ``past``
    positions, zeros (masked) before them."""
    from transformers import DynamicCache

    template = next(found for found in layers if found)
    cache = DynamicCache()
    for layer, (keys, values) in enumerate(template):
        shape = (len(layers), keys.shape[1], past, keys.shape[3])
        batch_keys = keys.new_zeros(shape)
        batch_values = values.new_zeros((len(layers), values.shape[1], past, values.shape[3]))
        for row, found in enumerate(layers):
            if found:
                batch_keys[row, :, past - cached[row] :] = found[layer][0][0]
                batch_values[row, :, past - cached[row] :] = found[layer][1][0]
        cache.update(batch_keys, batch_values, layer)
    return cache


def through_first_stop(tokens: list[int], stops: set[int]) -> list[int]:
    ended = next((i for i, token in enumerate(tokens) if token in stops), None)
    return tokens if ended is None else tokens[: ended + 1]


def without_special_tokens(text: str, tokenizer: Any) -> str:
    for token in sorted(getattr(tokenizer, "all_special_tokens", ()) or (), key=len, reverse=True):
        if token:
            text = text.replace(token, "")
    return text.strip()


def share_cores_with_other_workers(torch: Any) -> None:
    """Under xdist, give this worker its share of the cores instead of all of them each."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or not workers.isdigit() or int(workers) <= 1:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(max(1, (cores or 1) // int(workers)))


def build_transformers_policy(
    settings: Settings, overload: OverloadSignal | None = None
) -> TransformersPolicy:
    """Check model, extra and chat template before any episode; every misfit is exit 4.
    (No endpoint, so no ``overload`` to tell.)"""
    llm = settings.llm
    where = "--openenv-policy=transformers"
    if not llm.model:
        raise pytest.UsageError(
            f"{where} needs --openenv-model=PATH_OR_ID: a checkpoint folder (what "
            "save_pretrained writes), a .gguf file, or a Hub model id"
        )
    if llm.endpoint:
        raise pytest.UsageError(
            f"--openenv-llm-endpoint does not apply to {where}, which runs the checkpoint "
            "in-process; drop one of them (an endpoint goes with --openenv-policy=openai)"
        )
    try:
        checkpoint = find_checkpoint(str(llm.model))
    except CheckpointProblem as exc:
        raise pytest.UsageError(f"--openenv-model={llm.model}: {exc}") from None
    if checkpoint.own_code and not llm.trust_remote_code:
        raise pytest.UsageError(
            f"--openenv-model={llm.model}: the checkpoint needs its own Python code "
            f"({'; '.join(checkpoint.own_code[:3])}), which pytest-openenv does not run "
            "unless told: read that code, then pass --openenv-trust-remote-code to run it, "
            "or use a checkpoint of an architecture transformers ships"
        )
    if not llm.replay:  # a replay answers from the cache: no model is loaded
        missing = [
            pip for module, pip in NEEDED.items() if importlib.util.find_spec(module) is None
        ]
        if missing:
            raise pytest.UsageError(
                f"{where} needs {' and '.join(missing)}, which "
                f"{'is' if len(missing) == 1 else 'are'} not installed: {EXTRA}"
            )
    fit = None
    if not llm.replay:
        try:
            fit = probe(render_with_transformers(checkpoint.chat_template))
        except RenderTimeout as exc:
            raise pytest.UsageError(
                f"--openenv-model={llm.model}: {exc}. Give the checkpoint a chat template "
                "that ends (tokenizer_config.json's chat_template, or chat_template.jinja)"
            ) from None
        problems = fit.problems()
        if problems:
            warnings.warn(
                pytest.PytestWarning(
                    f"--openenv-model={llm.model}: its chat template {' and '.join(problems)}. "
                    "The episodes still run, but the model plays blind; give the checkpoint a "
                    "tool-calling template (docs/policies-and-llm-endpoints.md#a-local-model-"
                    "in-process-transformers)"
                ),
                stacklevel=2,
            )
    sampling = LocalSampling(
        temperature=llm.temperature,
        max_tokens=llm.max_tokens,
        request_timeout=llm.request_timeout,
        timeout=settings.run.timeout,
    )
    return TransformersPolicy(
        checkpoint,
        sampling,
        fit,
        trust_remote_code=llm.trust_remote_code,
        batch=concurrency_ceiling(settings.run.concurrency),
        dtype=llm.model_dtype,
    )
