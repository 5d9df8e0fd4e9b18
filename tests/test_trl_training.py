"""``pytest_openenv.trl``: TRL's GRPOTrainer plays an env through ``environment_factory``
with the run's prompt, tools and verdict, and ``EvalCallback`` judges the model being
trained every N steps as a run."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

# torch, transformers, datasets and TRL load once per process, before any pytester run of
# this module (see tests/test_preferences.py)
import datasets  # noqa: F401
import pytest
import tokenizers  # noqa: F401
import torch
import transformers
import trl
from helpers import read_jsonl
from tiny_models import Lesson, taught_checkpoint
from transformers.utils import get_json_schema
from trl.chat_template_utils import qwen3_template

from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.errors import TrainingSetupError
from pytest_openenv.policies.callable import CallablePolicy
from pytest_openenv.trl import (
    EvalCallback,
    environment_factory,
    reward_func,
    seed_dataset,
    seed_rows,
)

ENV = "reasoning_gym:chain_sum"
SEEDS = range(4)

REPLAY = """
import json, pathlib

ROLLOUTS = json.loads(pathlib.Path(__file__).with_name("rollouts.json").read_text())


def replay(messages, tools, turn):
    calls = ROLLOUTS.get(f"{turn.seed}/{turn.repeat}", [])
    made = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
    return calls[made] if made < len(calls) else None
"""


def oracle_answer(seed: int) -> str:
    def oracle(messages: Any, tools: Any, turn: Any) -> Any:
        return turn.scripted

    family = build_family(ENV, {})
    spec = EpisodeSpec(env=ENV, index=seed, seed=seed)
    episode = run_episode(spec, EnvFactory(family), CallablePolicy(oracle))
    return str(episode.tool_trace[0]["arguments"]["answer"])


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model that answers seeds 0 and 1 right and 2 and 3 wrong, through the tool,
    on the prompt TRL renders (the environment's methods as tools)."""
    environment = environment_factory(ENV)
    tools = [get_json_schema(environment.answer)]
    lessons = []
    for seed in SEEDS:
        messages = seed_rows(environment, [seed])[0]["prompt"]
        messages[-1]["content"] = environment().reset(seed=seed)
        answer = oracle_answer(seed) if seed < 2 else "12345"
        call = json.dumps({"name": "answer", "arguments": {"answer": answer}})
        reply = f"<tool_call>\n{call}\n</tool_call>"
        lessons.append(Lesson(messages, reply, tools))
    return taught_checkpoint(tmp_path_factory.mktemp("student"), lessons, steps=300)


def grpo(student: Path, tmp_path: Path, reward_funcs: list[Any], max_steps: int) -> Any:
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(student)
    tokenizer.response_template = qwen3_template  # the Hermes <tool_call> format Qwen uses
    model = transformers.AutoModelForCausalLM.from_pretrained(student, dtype=torch.float32)
    environment = environment_factory(ENV)
    config = trl.GRPOConfig(
        output_dir=str(tmp_path / "grpo"),
        max_steps=max_steps,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=40,
        temperature=0.7,
        learning_rate=1e-4,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    return trl.GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=config,
        train_dataset=seed_dataset(environment, SEEDS),
        processing_class=tokenizer,
        environment_factory=environment,
    )


def tool_calls(completion: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
        for message in completion
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    ]


def test_the_reset_prompt_is_a_run_rows_first_user_message_and_the_tools_its_tools(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    run_pytest(f"--openenv-env={ENV}", "--openenv-n=2", "--openenv-seed=5")
    rows = read_jsonl(pytester.path / "openenv-results" / "results.jsonl") + read_jsonl(
        pytester.path / "openenv-results" / "failures.jsonl"
    )
    assert len(rows) == 2
    environment = environment_factory(ENV)
    for row in rows:
        first = seed_rows(environment, [row["seed"]])[0]["prompt"]
        first[-1]["content"] += environment().reset(seed=row["seed"])
        assert first == [{"role": m["role"], "content": m["content"]} for m in row["messages"][:2]]
        schema = get_json_schema(environment.answer)["function"]
        (tool,) = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
        tool = tool.get("function", tool)
        assert (schema["name"], schema["description"]) == (tool["name"], tool["description"])
        parameters = (
            json.loads(tool["parameters"])
            if isinstance(tool["parameters"], str)
            else tool["parameters"]
        )
        assert schema["parameters"]["required"] == parameters["required"]
        assert schema["parameters"]["properties"] == parameters["properties"]


def test_a_row_without_a_seed_is_refused_naming_the_column() -> None:
    with pytest.raises(TrainingSetupError, match="integer `seed` column"):
        environment_factory(ENV)().reset(prompt="hi")


@pytest.mark.slow
def test_grpo_rewards_equal_seed_by_seed_what_a_run_judges_of_the_same_moves(
    student: Path, tmp_path: Path, pytester: pytest.Pytester, run_pytest: Any
) -> None:
    got: list[dict[str, Any]] = []

    def verdict(completions: Any, environments: Any, seed: Any, **kwargs: Any) -> Any:
        rewards = reward_func(environments=environments)
        for completion, row_seed, reward in zip(completions, seed, rewards, strict=True):
            got.append({"seed": row_seed, "calls": tool_calls(completion), "reward": reward})
        return rewards

    trainer = grpo(student, tmp_path, [verdict], max_steps=2)
    callback = EvalCallback(
        ENV, n=4, seed=0, every=1, output=tmp_path / "evals", max_tokens=40
    ).attach(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(got) == 8  # 2 steps x 2 prompts x 2 generations
    assert {g["reward"] for g in got} == {0.0, 1.0}, got  # the student passes some, not all

    # the same moves, replayed by a plugin run: rollout k of a seed is its repeat k
    rollouts: dict[str, list[dict[str, Any]]] = {}
    rewarded: dict[str, float | None] = {}
    count: dict[int, int] = defaultdict(int)
    for rollout in got:
        key = f"{rollout['seed']}/{count[rollout['seed']]}"
        rollouts[key], rewarded[key] = rollout["calls"], rollout["reward"]
        count[rollout["seed"]] += 1
    pytester.makepyfile(replay_policy=REPLAY)
    (pytester.path / "rollouts.json").write_text(json.dumps(rollouts))
    run_pytest(
        f"--openenv-env={ENV}",
        f"--openenv-n={len(SEEDS)}",
        "--openenv-seed=0",
        f"--openenv-repeats={max(count.values())}",
        "--openenv-policy=replay_policy:replay",
    )
    folder = pytester.path / "openenv-results"
    judged = {}
    for row in read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl"):
        repeat = int(row["episode_id"].rpartition("-r")[2]) if "-r" in row["episode_id"] else 0
        judged[f"{row['seed']}/{repeat}"] = float(row["passed"])
    assert len(judged) == len(SEEDS) * max(count.values())
    assert {key: judged.get(key) for key in rollouts} == rewarded, judged

    # the callback's evaluations at steps 0, 1 and 2, in the trainer's log and as folders
    logged = {e["step"]: e for e in trainer.state.log_history if "openenv/pass_rate" in e}
    assert sorted(logged) == [0, 1, 2]
    for step, entry in logged.items():
        assert entry["openenv/pass_rate_low"] <= entry["openenv/pass_rate"]
        assert entry["openenv/pass_rate"] <= entry["openenv/pass_rate_high"]
        assert entry["openenv/episodes"] == 4
        run = tmp_path / "evals" / f"step-{step:06d}"
        summary = json.loads((run / "summary.json").read_text())
        assert summary["figures"]["pass_rate"] == entry["openenv/pass_rate"]
        assert summary["figures"]["models"] == [f"trained model, step {step}"]
        assert (run / "report.html").exists()
        if step:
            assert 0.0 <= entry["openenv/p_vs_step0"] <= 1.0
            assert 0.0 <= entry["openenv/p_vs_best"] <= 1.0
        else:
            assert "openenv/p_vs_step0" not in entry
    assert callback.stopped_because is None


@pytest.mark.slow
def test_the_callback_gate_stops_training_at_the_first_evaluation_below_it(
    student: Path, tmp_path: Path
) -> None:
    trainer = grpo(student, tmp_path, [reward_func], max_steps=3)
    callback = EvalCallback(
        ENV, n=4, seed=0, every=1, output=tmp_path / "evals", max_tokens=40, min_pass_rate=1.0
    ).attach(trainer)
    trainer.train()
    assert trainer.state.global_step == 1
    assert callback.stopped_because is not None
    assert "failed its gate" in callback.stopped_because
    assert [e["step"] for e in callback.evaluations] == [0, 1]
