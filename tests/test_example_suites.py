"""Each suite in example_suites/ runs green from its own folder, as the README says.

The commands are the README's, plus an output folder, hypothesis database and no
bytecode under tmp_path, so running them never writes into the checkout.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "example_suites"


def run_suite(name: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None):
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_XDIST", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST"))
        and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_STEP_SUMMARY")
    }
    clean.update(
        PYTHONDONTWRITEBYTECODE="1",
        HYPOTHESIS_STORAGE_DIRECTORY=str(tmp_path / "hypothesis"),
        **(env or {}),
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--openenv-output={tmp_path / 'out'}",
            *args,
        ],
        cwd=EXAMPLES / name,
        env=clean,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout + result.stderr
    assert "INTERNALERROR" not in out, out[-4000:]
    return result.returncode, out


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_example_folders_are_the_documented_ones():
    assert sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()) == [
        "env_properties",
        "grpo_after_sft",
        "reasoning_gym_eval",
        "sft_warmup",
        "snapshots",
        "tic_tac_toe_gate",
    ]


@pytest.mark.slow
def test_snapshots_suite_is_green_as_committed(tmp_path):
    before = tree_digest(EXAMPLES / "snapshots")
    code, out = run_suite("snapshots", tmp_path, "-n", "2")
    assert code == 0, out[-4000:]
    assert "6 snapshots passed" in out and "6 passed" in out
    assert tree_digest(EXAMPLES / "snapshots") == before  # nothing rewritten or added


@pytest.mark.slow
def test_reasoning_gym_eval_reports_pass_at_k_and_passes_its_gate(tmp_path):
    code, out = run_suite("reasoning_gym_eval", tmp_path, "-n", "2")
    assert code == 0, out[-4000:]
    assert "repeats: 4 per seed over 15 seed(s): pass@1" in out
    assert "gate: PASSED" in out and "pass@4 >= 0.8 (point estimate)" in out
    assert "failed" in out  # some samples are wrong: the gate, not every episode, decides


@pytest.mark.slow
def test_env_properties_embedded_and_remote(tmp_path):
    code, out = run_suite("env_properties", tmp_path)
    assert code == 0, out[-4000:]
    assert "5 passed" in out


@pytest.mark.slow
def test_env_properties_without_a_server_stack_names_the_extra(tmp_path):
    """With only ``[all]`` (no uvicorn), the remote properties say what to install."""
    (tmp_path / "no_uvicorn.py").write_text("import sys\n\nsys.modules['uvicorn'] = None\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    code, out = run_suite("env_properties", tmp_path, "-p", "no_uvicorn", env={"PYTHONPATH": path})
    assert code == 1, out[-4000:]
    assert "which needs uvicorn: python -m pip install -e '../..[examples]'" in out, out[-4000:]
    assert "3 passed, 2 errors" in out  # the embedded properties still run


@pytest.mark.slow
def test_tic_tac_toe_gate_replays_its_committed_cache_like_its_workflow(tmp_path):
    workflow = EXAMPLES / "tic_tac_toe_gate" / ".github" / "workflows" / "tic-tac-toe-gate.yml"
    command = "python -m pytest --openenv-replay -n 2"
    assert f"run: {command}" in workflow.read_text()
    summary = tmp_path / "step_summary.md"
    before = tree_digest(EXAMPLES / "tic_tac_toe_gate")
    # no API key and no endpoint: every model answer must come from the committed cache
    code, out = run_suite(
        "tic_tac_toe_gate",
        tmp_path,
        *command.split()[3:],
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert code == 0, out[-4000:]
    assert "0 errored" in out  # a cache miss would be an errored episode
    assert "gate: PASSED" in out and "lower 90% Wilson bound of pass@1 >= 0.6" in out
    assert "**Gate: PASSED**" in summary.read_text()
    assert tree_digest(EXAMPLES / "tic_tac_toe_gate") == before  # replay never writes the cache


@pytest.mark.parametrize("name", ["tic_tac_toe_gate"])
@pytest.mark.slow
def test_gate_fails_when_the_threshold_is_out_of_reach(tmp_path, name):
    """The same replayed run against a stricter gate: the exit code follows the gate."""
    code, out = run_suite(name, tmp_path, "--openenv-replay", "--openenv-min-pass-rate=0.9")
    assert code == 1, out[-4000:]
    assert "gate: FAILED" in out
