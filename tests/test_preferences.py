"""``preferences.jsonl``: a passing and a failing episode of one seed as a TRL preference
pair; it loads as the folder's ``preferences`` config and trains TRL's DPOTrainer."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

# torch, transformers, datasets and TRL load once per process, before any pytester run of
# this module: one first imported inside an in-process pytester run is dropped from
# sys.modules at its teardown, and importing torch a second time crashes the process
import datasets
import pytest
import tokenizers  # noqa: F401
import torch
import transformers
import trl
from helpers import read_jsonl
from tiny_models import random_checkpoint

from pytest_openenv.dataset.preferences import split_point

RANDOM_TEST = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=6, policy="random")
def test_random_player(episode):
    assert episode.passed, episode.explain()
"""


def repeated_run(pytester: pytest.Pytester, run_pytest: Any, *extra: str) -> Path:
    pytester.makepyfile(test_random=RANDOM_TEST)
    result = run_pytest("--openenv-repeats=3", "-n", "0", *extra)
    assert result.ret == 1, result.stdout.str()[-3000:]
    return pytester.path / "openenv-results"


def test_pairs_split_a_passing_and_a_failing_episode_of_one_seed_at_their_first_move_apart(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    folder = repeated_run(pytester, run_pytest)
    passed = {r["episode_id"]: r for r in read_jsonl(folder / "results.jsonl")}
    failed = {r["episode_id"]: r for r in read_jsonl(folder / "failures.jsonl")}
    pairs = read_jsonl(folder / "preferences.jsonl")
    assert pairs
    for pair in pairs:
        good, bad = passed[pair["chosen_episode_id"]], failed[pair["rejected_episode_id"]]
        assert good["seed"] == bad["seed"] == pair["seed"]
        assert bad["failure"]["outcome"] == "failed" and not bad["verify_metrics"]["verdict"]
        assert pair["prompt"] + pair["chosen"] == good["messages"]
        assert pair["prompt"] + pair["rejected"] == bad["messages"]
        assert pair["chosen"][0]["role"] == pair["rejected"][0]["role"] == "assistant"
        assert pair["chosen"][0] != pair["rejected"][0]  # they part at that move
        assert pair["chosen"][0]["tool_calls"] and pair["rejected"][1]["role"] == "tool"
        assert (pair["chosen_reward"], pair["rejected_reward"]) == (good["reward"], bad["reward"])
        assert pair["tools"] == good["tools"]
        assert pair["test"] == "test_random.py::test_random_player"

    # max(p, f) pairs per seed with both, each episode in at least one pair, none twice
    by_seed: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in [*passed.values(), *failed.values()]:
        by_seed[row["seed"]].append(row)
    expected = 0
    for rows in by_seed.values():
        p = sum(r["passed"] for r in rows)
        f = len(rows) - p
        expected += max(p, f) if p and f else 0
    assert len(pairs) == expected
    ids = [(p["chosen_episode_id"], p["rejected_episode_id"]) for p in pairs]
    assert len(set(ids)) == len(ids)
    in_pairs = {i for pair in ids for i in pair}
    mixed = {s for s, rows in by_seed.items() if len({r["passed"] for r in rows}) == 2}
    assert in_pairs == {r["episode_id"] for s in mixed for r in by_seed[s]}


@pytest.mark.slow
def test_the_pairs_load_as_the_preferences_config_and_train_two_dpo_steps(
    pytester: pytest.Pytester, run_pytest: Any, tmp_path: Path
) -> None:
    folder = repeated_run(pytester, run_pytest)
    card = (folder / "README.md").read_text()
    assert "config_name: preferences" in card
    pairs = datasets.load_dataset(str(folder), "preferences", split="train")
    assert len(pairs) == len(read_jsonl(folder / "preferences.jsonl")) > 0
    assert pairs[0]["prompt"][0]["role"] == "system"
    # the default config is still the SFT rows
    assert len(datasets.load_dataset(str(folder), split="train")) == len(
        read_jsonl(folder / "results.jsonl")
    )

    checkpoint = random_checkpoint(tmp_path / "tiny")
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    model = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    config = trl.DPOConfig(
        output_dir=str(tmp_path / "dpo"),
        max_steps=2,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        max_length=1024,
    )
    trainer = trl.DPOTrainer(
        model=model, args=config, train_dataset=pairs, processing_class=tokenizer
    )
    before = [p.detach().clone() for p in model.parameters()]
    result = trainer.train()
    assert result.global_step == 2
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(loss == loss for loss in losses)  # no NaN
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_without_repeats_no_preferences_file_is_written_and_the_card_lists_none(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    pytester.makepyfile(test_random=RANDOM_TEST)
    run_pytest("-n", "0")
    folder = pytester.path / "openenv-results"
    assert not (folder / "preferences.jsonl").exists()
    assert "preferences" not in (folder / "README.md").read_text()


@pytest.mark.slow
def test_a_new_run_moves_the_earlier_pairs_aside(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    folder = repeated_run(pytester, run_pytest)
    first = (folder / "preferences.jsonl").read_text()
    repeated_run(pytester, run_pytest)
    kept = list(folder.glob("preferences.*.jsonl"))
    assert len(kept) == 1 and kept[0].read_text() == first


@pytest.mark.slow
def test_the_chat_template_check_renders_the_pairs_too(
    pytester: pytest.Pytester, run_pytest: Any, tmp_path: Path
) -> None:
    checkpoint = random_checkpoint(tmp_path / "tiny")
    folder = repeated_run(pytester, run_pytest, f"--openenv-chat-template={checkpoint}")
    check = json.loads((folder / "metadata.json").read_text())["chat_template"]
    assert check["pairs_checked"] == min(8, len(read_jsonl(folder / "preferences.jsonl")))
    assert check["pair_problems"] == []


# -- where a pair splits --------------------------------------------------------------------
SYSTEM = {"role": "system", "content": "play"}
USER = {"role": "user", "content": "board"}


def move(n: int) -> dict[str, Any]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "m", "arguments": str(n)}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def result(text: str) -> dict[str, Any]:
    return {"role": "tool", "content": text, "tool_call_id": "c", "name": "m"}


def test_a_pair_splits_at_the_first_assistant_turn_that_differs() -> None:
    good = [SYSTEM, USER, move(1), result("a"), move(2), result("won")]
    bad = [SYSTEM, USER, move(1), result("a"), move(3), result("lost")]
    assert split_point(good, bad) == 4


def test_a_pair_whose_env_answered_one_move_two_ways_splits_before_that_move() -> None:
    good = [SYSTEM, USER, move(1), result("a"), move(2)]
    bad = [SYSTEM, USER, move(1), result("b"), move(2)]
    assert split_point(good, bad) == 2


def test_episodes_with_different_prompts_or_nothing_past_the_shared_part_make_no_pair() -> None:
    other = [SYSTEM, {"role": "user", "content": "another board"}, move(1)]
    assert split_point([SYSTEM, USER, move(1)], other) is None
    assert split_point([SYSTEM, USER, move(1)], [SYSTEM, USER, move(1)]) is None


def test_several_policies_on_the_same_seeds_pair_across_players(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-policy=random",
        "--openenv-policy=scripted",
        "--openenv-n=8",
        "-n",
        "0",
    )
    assert result.ret == 1
    folder = pytester.path / "openenv-results"
    rows = {r["episode_id"]: r for r in read_jsonl(folder / "results.jsonl")}
    rows.update({r["episode_id"]: r for r in read_jsonl(folder / "failures.jsonl")})
    pairs = read_jsonl(folder / "preferences.jsonl")
    assert pairs
    for pair in pairs:
        good, bad = rows[pair["chosen_episode_id"]], rows[pair["rejected_episode_id"]]
        assert {good["policy"], bad["policy"]} == {"random", "scripted"}
        assert (pair["chosen_player"], pair["rejected_player"]) == (good["policy"], bad["policy"])
        assert good["seed"] == bad["seed"] and good["passed"] and not bad["passed"]
