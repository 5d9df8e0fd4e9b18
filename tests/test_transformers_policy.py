"""``--openenv-policy=transformers`` with real (tiny) checkpoints: loading, prompts, parsing,
seeded sampling, usage, token limits, the context window, xdist and the response cache.

Needs the ``[transformers]`` extra (torch, transformers). Where it is missing these tests
are skipped with that reason, except under CI (``CI`` set), where a missing extra is an
error: CI must install it, so a green CI always ran them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

MISSING = [name for name in ("torch", "transformers") if importlib.util.find_spec(name) is None]
if MISSING:
    if os.environ.get("CI"):
        raise RuntimeError(
            f"CI must install the [transformers] extra to run {__name__} ({MISSING} missing)"
        )
    pytest.skip(
        f"needs the [transformers] extra ({', '.join(MISSING)} missing)", allow_module_level=True
    )

# imported before any test takes pytester's snapshot of sys.modules: a first import inside a
# pytester test is undone at its teardown, and numpy cannot be imported twice in a process
import tokenizers  # noqa: E402, F401
import torch  # noqa: E402
import transformers  # noqa: E402, F401
from tiny_models import (  # noqa: E402
    HERMES_TEMPLATE,
    PLAIN_TEMPLATE,
    TOOL,
    Lesson,
    random_checkpoint,
    taught_checkpoint,
)

from pytest_openenv.config.settings import LLMSettings, RunSettings, Settings  # noqa: E402
from pytest_openenv.policies.base import ContextExhausted, Turn  # noqa: E402
from pytest_openenv.policies.llm.template_fit import (  # noqa: E402
    probe,
    render_with_transformers,
)
from pytest_openenv.policies.llm.transformers_local import (  # noqa: E402
    TransformersPolicy,
    build_transformers_policy,
)

ENV = "--openenv-env=openspiel:tic_tac_toe"


@pytest.fixture(autouse=True)
def one_thread_per_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child pytest runs take one core each: beside xdist workers, torch's default of one
    thread per core makes the threads spin against each other."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


#: one conversation per format; the taught model answers each in that format
FORMATS = {
    "hermes": '<tool_call>\n{"name": "play_move", "arguments": {"action_id": 4}}\n</tool_call>',
    "llama_tag": '<|python_tag|>{"name": "play_move", "parameters": {"action_id": 4}}',
    "llama_json": '{"name": "play_move", "parameters": {"action_id": 4}}',
    "plain_json": 'Centre. {"name": "play_move", "arguments": {"action_id": 4}}',
    "prose": "I would rather not play.",
}


def conversation(word: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "Play tic-tac-toe."},
        {"role": "user", "content": f"Reply in the {word} way."},
    ]


def turn(messages: list[dict[str, Any]], *, seed: int = 0, number: int = 1) -> Turn:
    return Turn(messages=messages, tools=[TOOL], episode_id="ep-000000", seed=seed, turn=number)


def policy_for(
    folder: Path, *, temperature: float = 0.0, max_tokens: int = 64, concurrency: int = 1
) -> Any:
    settings = Settings(
        run=RunSettings(concurrency=concurrency),
        llm=LLMSettings(model=str(folder), temperature=temperature, max_tokens=max_tokens),
    )
    policy = build_transformers_policy(settings)
    policy.load(strict=True)
    return policy


@pytest.fixture(scope="module")
def taught(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lessons = [Lesson(conversation(word), reply) for word, reply in FORMATS.items()]
    return taught_checkpoint(tmp_path_factory.mktemp("taught"), lessons)


@pytest.fixture(scope="module")
def babbler(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_checkpoint(tmp_path_factory.mktemp("random"))


@pytest.mark.parametrize("word", ["hermes", "llama_tag", "llama_json", "plain_json"])
@pytest.mark.slow
def test_each_format_the_model_emits_becomes_a_tool_call(taught: Path, word: str) -> None:
    reply = policy_for(taught).act(turn(conversation(word)))
    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("play_move", {"action_id": 4})
    ]
    assert reply.tool_calls[0].id == "call_001_0"
    assert reply.content == ("Centre." if word == "plain_json" else "")


@pytest.mark.slow
def test_prose_is_a_turn_without_a_call(taught: Path) -> None:
    reply = policy_for(taught).act(turn(conversation("prose")))
    assert reply.tool_calls == ()
    assert reply.content == FORMATS["prose"]


@pytest.mark.slow
def test_usage_counts_the_prompt_and_the_reply_tokens(taught: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(taught)
    messages = conversation("hermes")
    prompt = tokenizer.apply_chat_template(
        messages, tools=[TOOL], add_generation_prompt=True, tokenize=False
    )
    reply = policy_for(taught).act(turn(messages))
    assert reply.usage.prompt_tokens == len(tokenizer(prompt, add_special_tokens=False).input_ids)
    expected = len(tokenizer(FORMATS["hermes"] + "<|im_end|>", add_special_tokens=False).input_ids)
    assert reply.usage.completion_tokens == expected


def test_the_prompt_holds_the_tools_and_earlier_calls(babbler: Path) -> None:
    """What the model reads: the tool schema, and its previous call with intact arguments."""
    from transformers import AutoTokenizer

    policy = policy_for(babbler)
    assert policy.fit is not None and policy.fit.shows_tools
    assert policy.fit.arguments_form == "string"
    tokenizer = AutoTokenizer.from_pretrained(babbler)
    messages = [
        *conversation("hermes"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_001",
                    "type": "function",
                    "function": {"name": "play_move", "arguments": '{"action_id": 4}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_001", "name": "play_move", "content": "ok"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=[TOOL], tokenize=False)
    assert '"description": "Play one legal move, given by its action id."' in text
    assert '<tool_call>\n{"name": "play_move", "arguments": {"action_id": 4}}\n</tool_call>' in text


def test_temperature_zero_is_greedy_and_repeatable(babbler: Path) -> None:
    first = policy_for(babbler, max_tokens=12).act(turn(conversation("a"), seed=1))
    again = policy_for(babbler, max_tokens=12).act(turn(conversation("a"), seed=2))
    assert first == again  # greedy: the seed plays no part


def test_sampling_is_seeded_per_episode_and_turn(babbler: Path) -> None:
    policy = policy_for(babbler, temperature=1.0, max_tokens=12)
    other = policy_for(babbler, temperature=1.0, max_tokens=12)
    messages = conversation("a")
    base = policy.act(turn(messages, seed=5, number=1))
    assert other.act(turn(messages, seed=5, number=1)) == base  # another process, same sample
    assert policy.act(turn(messages, seed=5, number=1)) == base
    assert policy.act(turn(messages, seed=6, number=1)) != base  # another episode
    assert policy.act(turn(messages, seed=5, number=2)) != base  # another turn


def test_max_tokens_bounds_each_reply(babbler: Path) -> None:
    for limit in (1, 5):
        reply = policy_for(babbler, temperature=1.0, max_tokens=limit).act(turn(conversation("a")))
        assert 1 <= reply.usage.completion_tokens <= limit


def test_a_prompt_past_the_context_window_ends_the_episode(tmp_path: Path) -> None:
    small = random_checkpoint(tmp_path / "small", window=64)
    with pytest.raises(ContextExhausted, match=r"context window of .* is 64"):
        policy_for(small).act(turn(conversation("a")))


def test_the_template_probe_picks_the_argument_form_each_template_needs() -> None:
    qwen_like = (  # tojson on the arguments: JSON text would be encoded twice
        "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
        '{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}'
        "{% endfor %}{% else %}{{ m.content }}{% endif %}{% endfor %}"
        "{% for t in tools or [] %}{{ t | tojson }}{% endfor %}"
    )
    deepseek_like = (  # string concatenation: an object makes it raise
        "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
        "{{ '```json\\n' + c.function.arguments + '\\n```' }}{% endfor %}"
        "{% else %}{{ m.content }}{% endif %}{% endfor %}"
    )
    hermes = probe(render_with_transformers(HERMES_TEMPLATE))
    assert (hermes.shows_tools, hermes.arguments_form, hermes.problems()) == (True, "string", [])
    qwen = probe(render_with_transformers(qwen_like))
    assert (qwen.shows_tools, qwen.arguments_form) == (True, "object")
    deepseek = probe(render_with_transformers(deepseek_like))
    assert (deepseek.shows_tools, deepseek.arguments_form) == (False, "string")
    plain = probe(render_with_transformers(PLAIN_TEMPLATE))
    assert (plain.shows_tools, plain.arguments_form) == (False, None)
    assert len(plain.problems()) == 2


def test_object_form_reaches_a_template_that_needs_it(tmp_path: Path) -> None:
    qwen_like = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}"
        "{% for c in m.tool_calls %}<tool_call>{{ {'name': c.function.name, "
        "'arguments': c.function.arguments} | tojson }}</tool_call>{% endfor %}"
        "{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% for t in tools or [] %}{{ t | tojson }}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    folder = random_checkpoint(tmp_path / "qwen", template=qwen_like)
    policy = policy_for(folder)
    assert policy.fit is not None and policy.fit.arguments_form == "object"
    messages = [
        *conversation("a"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "play_move", "arguments": "{}"},
                }
            ],
        },
    ]
    assert policy.act(turn(messages)).usage.prompt_tokens > 0  # renders without raising


@pytest.mark.slow
def test_a_template_that_drops_tools_warns_at_start(
    run_pytest, tmp_path: Path, monkeypatch
) -> None:
    folder = random_checkpoint(tmp_path / "plain", template=PLAIN_TEMPLATE)
    result = run_pytest(
        ENV,
        "--openenv-n=1",
        "--openenv-policy=transformers",
        f"--openenv-model={folder}",
        "--openenv-max-turns=1",
        "--openenv-max-tokens=4",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the episode fails; nothing errors
    err = result.stderr.str()
    assert "its chat template does not render the tools" in err
    assert "drops or garbles the assistant's earlier tool calls" in err


@pytest.mark.slow
def test_weights_that_do_not_load_are_exit_4_at_start(run_pytest, tmp_path: Path) -> None:
    folder = random_checkpoint(tmp_path / "broken")
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    result = run_pytest(ENV, "--openenv-policy=transformers", f"--openenv-model={folder}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--openenv-model=*broken: transformers could not load it*"])


def rows(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for name in ("results.jsonl", "failures.jsonl"):
        path = folder / name
        if path.exists():
            for line in path.read_text().splitlines():
                row = json.loads(line)
                found[row["episode_id"]] = row
    return found


@pytest.mark.slow
def test_two_workers_play_and_a_cache_replays_them(run_pytest, babbler: Path, tmp_path) -> None:
    cache = tmp_path / "cache"
    args = [
        ENV,
        "--openenv-n=4",
        "--openenv-policy=transformers",
        f"--openenv-model={babbler}",
        "--openenv-temperature=0.7",
        "--openenv-max-tokens=6",
        "--openenv-max-turns=2",
        f"--openenv-cache={cache}",
        "-n",
        "2",
    ]
    first = run_pytest(*args, f"--openenv-output={tmp_path / 'first'}")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    first.stdout.fnmatch_lines(["*episodes: 0 passed, 4 failed, 0 errored*"])
    recorded = rows(tmp_path / "first")
    assert len(recorded) == 4
    assert all(
        row["model"] == str(babbler) and row["policy"] == "transformers"
        for row in recorded.values()
    )
    assert all(row["metrics"]["completion_tokens"] > 0 for row in recorded.values())
    entries = list(cache.rglob("*.json"))
    assert len(entries) == 8  # two turns of four episodes
    replay = run_pytest(*args, "--openenv-replay", f"--openenv-output={tmp_path / 'replay'}")
    replay.stdout.fnmatch_lines(["*episodes: 0 passed, 4 failed, 0 errored*"])
    replayed = rows(tmp_path / "replay")
    assert {k: r["messages"] for k, r in replayed.items()} == {
        k: r["messages"] for k, r in recorded.items()
    }


def test_a_retrained_checkpoint_is_a_cache_miss(babbler: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(babbler, copy)
    settings = Settings(llm=LLMSettings(model=str(copy)))
    before = build_transformers_policy(settings).cache_identity()
    retrained = random_checkpoint(tmp_path / "retrained", seed=1)
    shutil.copy(retrained / "model.safetensors", copy / "model.safetensors")
    after = build_transformers_policy(settings).cache_identity()
    assert before[0] == after[0] == "transformers"
    assert before[1]["checkpoint"] != after[1]["checkpoint"]


def test_the_weights_load_in_the_type_asked_for_and_auto_keeps_float32_on_cpu(
    babbler: Path,
) -> None:
    loaded = {}
    for dtype in ("auto", "bfloat16"):
        settings = Settings(llm=LLMSettings(model=str(babbler), model_dtype=dtype, max_tokens=4))
        policy = build_transformers_policy(settings)
        policy.load(strict=True)
        _, _, model = policy._ensure_loaded()
        loaded[dtype] = {p.dtype for p in model.parameters()}
        reply = policy.act(turn(conversation("hermes")))
        assert reply.usage.completion_tokens > 0
        assert policy.describe()["dtype"] == dtype
    assert loaded["bfloat16"] == {torch.bfloat16}
    if not torch.cuda.is_available():  # on a GPU auto is the checkpoint's own type
        assert loaded["auto"] == {torch.float32}


def test_a_weight_type_other_than_auto_has_cache_entries_of_its_own(babbler: Path) -> None:
    keys = {
        dtype: build_transformers_policy(
            Settings(llm=LLMSettings(model=str(babbler), model_dtype=dtype))
        ).cache_identity()[1]
        for dtype in ("auto", "float32", "bfloat16")
    }
    # auto is keyed as before the option existed, so earlier caches still answer
    assert "dtype" not in keys["auto"]
    assert keys["float32"]["dtype"] == "float32" and keys["bfloat16"]["dtype"] == "bfloat16"
    assert len({json.dumps(key, sort_keys=True) for key in keys.values()}) == 3


def test_one_load_serves_every_thread(babbler: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    policy = policy_for(babbler, max_tokens=3)
    assert isinstance(policy, TransformersPolicy)
    loaded = policy._ensure_loaded()
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda s: policy.act(turn(conversation("a"), seed=s)), range(4)))
    assert policy._ensure_loaded() is loaded
    assert len(set(replies)) == 1  # greedy: the same prompt, the same reply, whatever the thread


def later_turn(messages: list[dict[str, Any]], reply_text: str) -> list[dict[str, Any]]:
    """The conversation one turn on: the model's reply, then the env's answer."""
    return [
        *messages,
        {"role": "assistant", "content": reply_text},
        {"role": "user", "content": "The board changed; your move again, please."},
    ]


def test_a_prompt_gets_the_same_reply_from_a_cold_and_a_warm_prefix_store(
    babbler: Path,
) -> None:
    cold = policy_for(babbler, max_tokens=8)
    wanted = cold.act(turn(later_turn(conversation("a"), "first")))
    warm = policy_for(babbler, max_tokens=8)
    for word in ("a", "b", "c"):  # other conversations fill the store with their blocks
        warm.act(turn(conversation(word)))
        warm.act(turn(later_turn(conversation(word), "other")))
    assert warm.prefixes is not None and warm.prefixes.reused_tokens > 0
    assert warm.act(turn(later_turn(conversation("a"), "first"))) == wanted


def test_a_later_turn_encodes_only_what_the_turn_added(babbler: Path) -> None:
    policy = policy_for(babbler, max_tokens=4)
    store = policy.prefixes
    assert store is not None
    messages = conversation("a")
    first = policy.act(turn(messages))
    computed_before = store.computed_tokens
    second = policy.act(turn(later_turn(messages, first.content or "x"), number=2))
    added = store.computed_tokens - computed_before
    assert store.reused_tokens >= first.usage.prompt_tokens - store.block
    assert added < second.usage.prompt_tokens - first.usage.prompt_tokens + store.block


def test_the_prefix_store_stays_within_its_budget(babbler: Path) -> None:
    from pytest_openenv.policies.llm.prefix_cache import PrefixStore

    policy = policy_for(babbler, max_tokens=2)
    policy.act(turn(conversation("a")))  # sizes one block of this model
    assert policy.prefixes is not None and policy.prefixes._blocks
    one_block = next(iter(policy.prefixes._blocks.values()))[1].nbytes()
    keyword = policy.prefixes.cache_keyword
    policy.prefixes = PrefixStore(keyword, budget_bytes=3 * one_block)
    for word in ("a", "b", "c", "d", "e"):
        policy.act(turn(later_turn(conversation(word), word * 40)))
    assert 0 < policy.prefixes.held_bytes <= 3 * one_block
    assert len(policy.prefixes._blocks) == 3


# -- turns of episodes in flight generated together ----------------------------------------


def act_all_at_once(policy: Any, prompts: list[list[dict[str, Any]]]) -> list[Any]:
    """Every turn queued before the first generation starts (the model held meanwhile)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(prompts)) as pool:
        with policy._model_lock:
            futures = [pool.submit(policy.act, turn(m, seed=i)) for i, m in enumerate(prompts)]
            while len(policy.batcher._queued) < len(prompts):
                assert not any(f.done() for f in futures), [f.exception() for f in futures]
                time.sleep(0.005)
        return [f.result() for f in futures]


def test_greedy_turns_in_flight_are_generated_together_with_the_tokens_they_get_alone(
    taught: Path,
) -> None:
    # first turns of each format and later turns, two blocks of the prefix store longer:
    # the batch holds rows of different cached and uncached lengths
    firsts = [conversation(word) for word in FORMATS]
    laters = [later_turn(conversation(word), "x " * 30 * n) for n, word in enumerate(FORMATS)]
    prompts = [*firsts, *laters]
    alone = policy_for(taught)
    assert alone.batcher is None
    solo = alone._generate
    expected_tokens: dict[tuple[int, ...], list[int]] = {}

    def generate_alone(torch_: Any, tokenizer: Any, model: Any, ids: Any, *rest: Any) -> Any:
        tokens = solo(torch_, tokenizer, model, ids, *rest)
        expected_tokens[tuple(ids["input_ids"][0].tolist())] = tokens
        return tokens

    alone._generate = generate_alone
    expected = [alone.act(turn(m, seed=i)) for i, m in enumerate(prompts)]

    shared = policy_for(taught, concurrency=len(prompts))
    batched = shared.batcher._generate
    batches: list[dict[tuple[int, ...], list[int]]] = []

    def generate_together(batch: Any) -> Any:
        tokens = batched(batch)
        batches.append({tuple(w.ids): t for w, t in zip(batch, tokens, strict=True)})
        return tokens

    shared.batcher._generate = generate_together
    replies = act_all_at_once(shared, prompts)

    assert [len(b) for b in batches] == [len(prompts)]
    assert batches[0] == expected_tokens
    assert replies == expected
    # each format its own taught reply: a batch that mixed up or shifted rows would show
    assert replies[0].tool_calls[0].name == "play_move"
    assert len({tuple(t) for t in expected_tokens.values()}) > len(FORMATS)


def test_sampled_turns_are_generated_alone_to_keep_their_seeds(babbler: Path) -> None:
    sampled = policy_for(babbler, temperature=1.0, max_tokens=12, concurrency=4)
    assert sampled.batcher is None
    alone = policy_for(babbler, temperature=1.0, max_tokens=12)
    messages = conversation("a")
    assert sampled.act(turn(messages, seed=5)) == alone.act(turn(messages, seed=5))


def test_a_batch_holds_at_most_the_episodes_in_flight_and_the_cap(babbler: Path) -> None:
    from pytest_openenv.policies.llm.transformers_local import MAX_BATCH

    assert policy_for(babbler, concurrency=3).batcher.limit == 3
    assert policy_for(babbler, concurrency=64).batcher.limit == MAX_BATCH
