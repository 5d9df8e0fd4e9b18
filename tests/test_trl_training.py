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
from servers.openenv_servers import serve_in_thread
from tiny_models import Lesson, random_checkpoint, taught_checkpoint
from transformers.utils import get_json_schema
from trl.chat_template_utils import qwen3_template

from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.errors import EvaluationRunFailed, TrainingSetupError
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


def taught_student(
    folder: Path, seeds: range, right: set[int], *, for_training: bool = True
) -> Path:
    """A tiny model that answers the seeds in ``right`` right and the others wrong, through
    the tool, on the prompt a run renders and (``for_training``) on the one TRL renders:
    TRL's tool schema leaves out ``additionalProperties``, and a model this small answers
    only the prompts it was taught."""
    environment = environment_factory(ENV)
    forms = [build_family(ENV, {}).openai_tools()]
    if for_training:
        forms.append([get_json_schema(environment.answer)])
    lessons = []
    for seed in seeds:
        messages = seed_rows(environment, [seed])[0]["prompt"]
        messages[-1]["content"] = environment().reset(seed=seed)
        answer = oracle_answer(seed) if seed in right else "12345"
        call = json.dumps({"name": "answer", "arguments": {"answer": answer}})
        reply = f"<tool_call>\n{call}\n</tool_call>"
        lessons += [Lesson(messages, reply, tools) for tools in forms]
    return taught_checkpoint(folder, lessons, steps=400)


@pytest.fixture(autouse=True)
def one_torch_thread() -> Any:
    """A model this small gains nothing from a second thread, and beside other processes
    (xdist, other jobs) two threads per process spin against each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def student(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Answers seeds 0 and 1 right and 2 and 3 wrong."""
    return taught_student(tmp_path_factory.mktemp("student"), SEEDS, {0, 1})


def load(checkpoint: Path) -> tuple[Any, Any]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.response_template = qwen3_template  # the Hermes <tool_call> format Qwen uses
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    return model, tokenizer


def grpo(
    student: Path,
    tmp_path: Path,
    reward_funcs: list[Any],
    max_steps: int,
    server: str | None = None,
) -> Any:
    torch.manual_seed(0)
    model, tokenizer = load(student)
    environment = environment_factory(ENV, server=server)
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
        gradient_checkpointing=False,  # memory a model this small does not need, for time
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
    # the trainer's own entry of each step (its loss and rewards) is logged beside them
    trained = [e["step"] for e in trainer.state.log_history if "reward" in e and "loss" in e]
    assert trained == [1, 2], trainer.state.log_history


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


def evaluate_models_in_turn(callback: EvalCallback, models: list[Path]) -> Any:
    """The callback's events as a trainer sends them, with model ``k`` trained at step
    ``k``: step 0 at the start of training, then one evaluation per step."""
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    for step, checkpoint in enumerate(models):
        model, tokenizer = load(checkpoint)
        state.global_step = step
        event = callback.on_train_begin if step == 0 else callback.on_step_end
        event(None, state, control, model=model, processing_class=tokenizer)
    return state, control


@pytest.mark.slow
def test_keep_best_saves_only_an_evaluation_significantly_better_than_the_best_before_it(
    student: Path, tmp_path: Path
) -> None:
    weak = taught_student(tmp_path / "weak", SEEDS, set(), for_training=False)  # passes none
    strong = taught_student(tmp_path / "strong", SEEDS, set(SEEDS), for_training=False)
    # at 60% confidence 4 seeds against none is significant (p = 1/8), 2 against none
    # (the student) is not (p = 1/2)
    callback = EvalCallback(
        ENV,
        n=4,
        seed=0,
        every=1,
        output=tmp_path / "evals",
        max_tokens=40,
        best_by="significant",
        keep_best=True,
        confidence=0.6,
    )
    state, control = evaluate_models_in_turn(callback, [weak, student, strong, weak])

    history = [e for e in state.log_history if "openenv/pass_rate" in e]
    assert [e["openenv/pass_rate"] for e in history] == [0.0, 0.5, 1.0, 0.0]
    # step 1 is higher, but 2 seeds against none is no evidence (p = 0.5): not the best
    assert history[1]["openenv/p_vs_best"] == 0.5
    assert [e["openenv/new_best"] for e in history] == [1, 0, 1, 0]
    assert [e["openenv/best_step"] for e in history] == [0, 0, 2, 2]
    assert [e.get("openenv/vs_best_step") for e in history] == [None, 0, 0, 2]
    assert history[2]["openenv/p_vs_best"] == 2 / 2**4  # 4 against 0, two-sided
    assert callback.best_step == 2

    best = tmp_path / "evals" / "best"
    assert callback.best_checkpoint == best
    record = json.loads((best / "openenv_best.json").read_text())
    assert record["step"] == 2
    assert record["evaluation"] == "step-000002"
    assert Path(record["evaluation_folder"]) == (tmp_path / "evals" / "step-000002").resolve()
    assert record["pass_rate"] == 1.0
    assert record["previous_best"]["step"] == 0
    assert record["previous_best"]["only_this_passed"] == 4
    assert record["previous_best"]["only_previous_passed"] == 0
    assert "McNemar" in record["rule"]
    # the folder holds the model of step 2, not of the step that came after it
    kept = transformers.AutoModelForCausalLM.from_pretrained(best).state_dict()
    for name, weights in load(strong)[0].state_dict().items():
        assert torch.equal(kept[name], weights), name
    assert transformers.AutoTokenizer.from_pretrained(best).chat_template
    assert not [p.name for p in best.parent.iterdir() if p.name.startswith(".best")]
    saved = json.loads((tmp_path / "evals" / "step-000002" / "training_eval.json").read_text())
    assert saved["checkpoint"] == str(best)
    assert not control.should_training_stop


SUITE = """
import pytest


@pytest.mark.openenv("reasoning_gym:chain_sum", n=4, seed=0)
def test_sums(episode):
    assert episode.passed, episode.explain()


@pytest.mark.openenv("reasoning_gym:chain_sum", n=2, seed=2)
@pytest.mark.hard
def test_hard_sums(episode):
    assert episode.passed, episode.explain()


@pytest.mark.openenv("reasoning_gym:chain_sum", n=3, seed=0)
@pytest.mark.flaky_env
def test_left_out_by_the_marker_expression(episode):
    assert episode.passed
"""


@pytest.mark.slow
def test_a_suite_file_runs_with_its_tests_markers_and_gate_and_its_gate_stops_training(
    student: Path, tmp_path: Path
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_chain_sum.py").write_text(SUITE)
    (suite / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    hard\n    flaky_env\nopenenv_min_pass_rate = 0.75\n"
    )
    callback = EvalCallback(
        suite=suite / "test_chain_sum.py",
        every=1,
        output=tmp_path / "evals",
        max_tokens=40,
        pytest_args=["-m", "not flaky_env"],
    )
    _, control = evaluate_models_in_turn(callback, [student, student])

    for step in (0, 1):
        folder = tmp_path / "evals" / f"step-{step:06d}"
        played = {
            (row["test"].partition("[")[0].rpartition("::")[2], row["seed"])
            for row in read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")
        }
        assert played == {("test_sums", s) for s in range(4)} | {
            ("test_hard_sums", 2),
            ("test_hard_sums", 3),
        }
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["figures"]["pass_rate"] == pytest.approx(2 / 6)  # seeds 0 and 1 of test_sums
        assert summary["gate"]["passed"] is False  # the suite's own 0.75
    # the same 6 episodes paired across the steps: the student did not change
    assert callback.evaluations[1]["paired"]["step 0"]["paired_episodes"] == 6
    assert control.should_training_stop
    assert callback.stopped_because is not None
    assert "failed its gate" in callback.stopped_because


@pytest.mark.slow
def test_training_and_evaluation_play_on_a_deployed_server_and_keep_its_password_out(
    student: Path, tmp_path: Path
) -> None:
    with serve_in_thread("reasoning_gym") as server:
        secret = server.url.replace("http://", "http://bob:hunter2@")
        rollouts: list[Any] = []

        def verdict(environments: Any, **kwargs: Any) -> Any:
            rollouts.extend(environment.episode for environment in environments)
            return reward_func(environments=environments)

        trainer = grpo(student, tmp_path, [verdict], max_steps=1, server=secret)
        callback = EvalCallback(
            ENV, server=secret, n=4, seed=0, every=1, output=tmp_path / "evals", max_tokens=40
        ).attach(trainer)
        trainer.train()
        opened = server.stats()["sessions_opened"]

    assert len(rollouts) == 4 and all(rollouts)
    assert {e.backend for e in rollouts} == {"remote"}
    assert {e.server for e in rollouts} == {server.url}
    assert opened > 0  # sessions are reused across episodes; the rows say where each played
    for step in (0, 1):
        folder = tmp_path / "evals" / f"step-{step:06d}"
        rows = read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")
        assert {(r["extra"]["backend"], r["extra"]["server"]) for r in rows} == {
            ("remote", server.url)
        }
        # the server's questions are the embedded env's: the student passes seeds 0 and 1
        assert sorted(r["seed"] for r in rows if r["passed"]) == [0, 1]
    assert [e["openenv/pass_rate"] for e in callback.evaluations] == [0.5, 0.5]
    written = "\n".join(p.read_text() for p in (tmp_path / "evals").rglob("*") if p.is_file())
    assert "hunter2" not in written
    assert "hunter2" not in json.dumps(trainer.state.log_history)


def test_an_evaluation_without_figures_names_its_arguments_but_not_the_server_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, tokenizer = load(random_checkpoint(tmp_path / "model"))
    callback = EvalCallback(
        "nosuchfamily:x", server="http://bob:hunter2@127.0.0.1:9", output=tmp_path / "evals"
    )
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    with pytest.raises(EvaluationRunFailed, match="exit code 4") as failed:
        callback.on_train_begin(None, state, control, model=model, processing_class=tokenizer)
    assert "--openenv-server=http://127.0.0.1:9" in str(failed.value)
    assert "--openenv-env=nosuchfamily:x" in str(failed.value)
    shown = capsys.readouterr()
    assert "hunter2" not in str(failed.value) + shown.out + shown.err
