"""example_suites/grpo_after_sft: its loop runs GRPO on tic-tac-toe with EvalCallback and
prints what each evaluation and stage measured (a tiny model in place of the SFT student;
the figures of the real one are in the example's README)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_models import random_checkpoint

EXAMPLE = Path(__file__).resolve().parent.parent / "example_suites" / "grpo_after_sft"
ROW = re.compile(
    r"^\| (\d+) \| (\d+)/(\d+) \((\d+)%-(\d+)%\) \| (\S+) \| (\S+) \| (\S+) \| (\d+) \|$"
)


@pytest.mark.slow
def test_the_loop_prints_every_evaluation_as_its_folders_record_it(tmp_path: Path) -> None:
    student = random_checkpoint(tmp_path / "student")
    work = tmp_path / "loop"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [
            sys.executable,
            "grpo_loop.py",
            f"--student={student}",
            f"--work={work}",
            "--grpo-steps=1",
            "--eval-seeds=2",
            "--max-turns=2",
            "--threads=1",
        ],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [ROW.match(line) for line in done.stdout.splitlines()]
    printed = {int(m[1]): m for m in rows if m}
    assert sorted(printed) == [0, 1]
    for step, row in printed.items():
        record = json.loads(
            (work / "evals" / f"step-{step:06d}" / "training_eval.json").read_text()
        )
        assert int(row[3]) == record["openenv/episodes"] == 2
        assert int(row[2]) == round(record["openenv/pass_rate"] * 2)
        assert float(row[7]) == pytest.approx(record["openenv/mean_reward"], abs=5e-4)
        assert int(row[9]) == record["openenv/best_step"]
    assert printed[0][6] == "-"  # step 0 is not paired with itself
    assert float(printed[1][6]) == pytest.approx(
        json.loads((work / "evals" / "step-000001" / "training_eval.json").read_text())[
            "openenv/p_vs_step0"
        ],
        rel=1e-2,
    )
    assert printed[1][8] != "-"  # the step's training reward, from the trainer's log
    assert "| GRPO, 1 steps (evaluations left out) |" in done.stdout
    for step in (0, 1):
        assert f"| evaluation at step {step}, 2 seeds |" in done.stdout
    assert (work / "evals" / "best" / "openenv_best.json").exists()
