"""The CI jobs' own pieces: the lowest-versions constraints and the scripts' failure modes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".ci"


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "lowest_constraints", CI / "lowest_constraints.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def project(dependencies: list[str], **extras: list[str]) -> dict:
    return {
        "project": {
            "name": "pytest-openenv",
            "dependencies": dependencies,
            "optional-dependencies": extras,
        }
    }


def test_floors_of_the_core_and_the_named_extras_only() -> None:
    floors = load_generator().floors
    pyproject = project(
        ["pytest>=8.3", "huggingface_hub >= 0.27, <2", "websockets>=15.0; python_version>'3'"],
        openai=["openai>=1.40"],
        all=["pytest-openenv[openai]", "reasoning-gym>=0.1.19"],
        test=["ruff>=0.6"],
    )
    assert floors(pyproject, ["openai", "all"]) == {
        "pytest": "8.3",
        "huggingface-hub": "0.27",
        "websockets": "15.0",
        "openai": "1.40",
        "reasoning-gym": "0.1.19",
    }


@pytest.mark.parametrize(
    ("dependencies", "extras", "message"),
    [
        (["pytest"], [], "'pytest' declares no floor"),
        (["pytest<9"], [], "'pytest<9' declares no floor"),
        (["pytest>=8.3"], ["nope"], "no such extra in pyproject.toml: ['nope']"),
    ],
)
def test_a_claim_that_cannot_be_checked_stops_the_job(
    dependencies: list[str], extras: list[str], message: str
) -> None:
    with pytest.raises(SystemExit, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_generator().floors(project(dependencies), extras)


def test_the_constraints_pin_every_core_dependency_at_its_floor() -> None:
    out = subprocess.run(
        [sys.executable, str(CI / "lowest_constraints.py"), "openspiel", "openai", "anthropic"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    names = {line.split("==")[0] for line in out}
    assert {"pytest", "pytest-xdist", "syrupy", "hypothesis", "huggingface-hub"} <= names
    assert {"websockets", "open-spiel", "openai", "anthropic"} <= names
    assert all("==" in line for line in out), out


@pytest.mark.parametrize("script", ["run", "lowest", "package", "system-packages"])
def test_each_job_stops_at_the_first_failure(script: str) -> None:
    """A failing step, pytest's exit 5 (nothing collected) included, fails the job."""
    text = (CI / script).read_text(encoding="utf-8")
    assert "set -euo pipefail" in text.splitlines()[:20]
    subprocess.run(["bash", "-n", str(CI / script)], check=True)


@pytest.mark.parametrize(
    ("code", "rows", "passes"),
    [(0, 200, True), (0, 163, False), (1, 200, False), (1, 163, False), (5, 0, False)],
)
def test_the_headline_check_wants_exit_0_and_200_rows(
    tmp_path: Path, code: int, rows: int, passes: bool
) -> None:
    fake = tmp_path / "python"  # stands in for a venv's python: writes rows, exits with code
    fake.write_text(
        "#!/bin/sh\nmkdir -p openenv-results\n"
        f"i=0; while [ $i -lt {rows} ]; do echo '{{}}'; i=$((i+1)); done"
        " > openenv-results/results.jsonl\n"
        f"exit {code}\n"
    )
    fake.chmod(0o755)
    result = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source .ci/lib.sh; headline {fake} 2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert f"headline: exit {code}, {rows} rows" in result.stdout, result.stdout + result.stderr
    assert (result.returncode == 0) == passes, result.stdout + result.stderr


def requirement_names(lines: list[str]) -> set[str]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return {canonicalize_name(Requirement(line).name) for line in lines}


def test_the_background_install_asks_for_what_the_test_extra_installs() -> None:
    """.ci/run installs these beside the other jobs; the last line then finds them in place."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    listed = subprocess.run(
        [sys.executable, str(CI / "requirements.py"), "test"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    own = "pytest-openenv"
    # what pip installs for .[test]: the core, and every extra the test extra names, however
    # deep; read from the installed metadata, not from the file the script reads
    declared = [Requirement(line) for line in requires(own) or []]
    wanted, extras, seen = set(), ["test"], set()
    while extras:
        extra = extras.pop()
        seen.add(extra)
        for requirement in declared:
            marker = requirement.marker
            if marker is None or not marker.evaluate({"extra": extra}):
                continue
            if requirement.name == own:
                extras += [name for name in requirement.extras if name not in seen]
            else:
                wanted.add(str(requirement.name))
    core = {str(r.name) for r in declared if r.marker is None}
    assert requirement_names(listed) == requirement_names([*wanted, *core])
    assert "torch" in requirement_names(listed) and own not in requirement_names(listed)


def test_a_background_job_that_fails_fails_the_run_and_shows_its_output(tmp_path: Path) -> None:
    script = (
        "set -euo pipefail; source .ci/lib.sh\n"
        f'in_background "good" {tmp_path}/good bash -c "echo fine"\n'
        f'in_background "bad" {tmp_path}/bad bash -c "echo broken; exit 3"\n'
        f"wait_for good {tmp_path}/good\n"
        f"wait_for bad {tmp_path}/bad\n"
        "echo not reached\n"
    )
    result = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "== good (in the background), exit 0:\n  fine" in result.stdout
    assert "== bad (in the background), exit 3:\n  broken" in result.stdout
    assert "FAILED: bad" in result.stderr and "not reached" not in result.stdout


def test_a_lowest_versions_python_that_fails_fails_the_job_after_both_ran() -> None:
    """The Pythons run side by side, each a process of its own: a failing step in one (here
    no such interpreter) ends that one, and the job fails naming it once both are done."""
    result = subprocess.run(
        ["bash", str(CI / "lowest")],
        cwd=ROOT,
        env={**os.environ, "CI_LOWEST_PYTHONS": "9.8 9.9"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0, result.stdout
    for version in ("9.8", "9.9"):
        assert f"no Python {version} on this machine" in result.stdout
        assert f"FAILED: lowest versions on Python {version}" in result.stderr
    assert "lowest-versions job wall time" in result.stdout


def test_a_tree_copy_holds_what_git_tracks_and_not_what_it_ignores(tmp_path: Path) -> None:
    assert list(ROOT.rglob("__pycache__")), "the tree has no ignored folder to leave out"
    script = f"set -euo pipefail; source .ci/lib.sh; tree_copy {tmp_path}/copy"
    subprocess.run(["bash", "-c", script], cwd=ROOT, check=True, timeout=120)
    copy = tmp_path / "copy"
    assert (copy / "pyproject.toml").read_bytes() == (ROOT / "pyproject.toml").read_bytes()
    assert (copy / "pytest_openenv" / "plugin.py").exists()
    assert (copy / ".ci" / "run").exists()
    assert not list(copy.rglob("__pycache__")) and not list(copy.glob("*.egg-info"))
    assert not (copy / ".git").exists()


def test_the_agent_programs_are_pinned_by_the_lock_at_exact_versions() -> None:
    """Each agent program package.json names is an exact version, and the lock holds that
    version: CI installs the programs the suite was checked with, never a newer release."""
    import json

    manifest = json.loads((CI / "agents" / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((CI / "agents" / "package-lock.json").read_text(encoding="utf-8"))
    wanted = manifest["dependencies"]
    assert set(wanted) == {"@anthropic-ai/claude-code", "@openai/codex", "opencode-ai"}
    for name, version in wanted.items():
        assert version[0].isdigit(), f"{name} is pinned as a range: {version}"
        assert lock["packages"][f"node_modules/{name}"]["version"] == version
