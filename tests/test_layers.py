"""The package's layers (pyproject.toml ``[tool.importlinter]``): each module imports only
from the layers below its own, and the controller and the worker never import each other.

Run with import-linter's own command, on this tree and on a copy with one upward import
planted, so the contract is shown to be able to break.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the ``pytest_openenv`` in ``tree`` with ``tree``'s contract."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [
        sys.executable,
        "-c",
        "from importlinter.cli import lint_imports_command; lint_imports_command()",
    ]
    return subprocess.run(
        [*command, "--no-cache"],  # the contract in tree/pyproject.toml, found from cwd
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_package_keeps_its_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "broken"),
    [
        (
            "util/format.py",
            "from ..controller import accounts",
            "pytest_openenv.util is not allowed to import pytest_openenv.controller",
        ),
        (
            "worker/items.py",
            "from ..controller import stopping",
            "pytest_openenv.worker is not allowed to import pytest_openenv.controller",
        ),
        (
            "envs/base.py",
            "from ..policies import base as _policies",
            "pytest_openenv.envs is not allowed to import pytest_openenv.policies",
        ),
        (
            "policies/scripted.py",
            "from ..envs import registry as _families",
            "pytest_openenv.policies is not allowed to import pytest_openenv.envs",
        ),
    ],
    ids=["upward", "side-to-side", "envs-to-policies", "policies-to-envs"],
)
@pytest.mark.slow
def test_a_planted_import_across_the_layers_breaks_the_contract(
    tmp_path: Path, module: str, planted: str, broken: str
) -> None:
    shutil.copytree(
        ROOT / "pytest_openenv",
        tmp_path / "pytest_openenv",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "pytest_openenv" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert broken in result.stdout
    assert "Contracts: 0 kept, 1 broken." in result.stdout
