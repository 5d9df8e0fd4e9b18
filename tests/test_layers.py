"""The package's layers (pyproject.toml ``[tool.importlinter]``): each module imports only
from the layers below its own, and the controller and the worker never import each other;
and no two modules import each other, however indirectly.

The layers are run with import-linter's own command, on this tree and on a copy with one
upward import planted, so the contract is shown to be able to break; the cycles are found
in the import graph read with ``ast`` (every import: at the top, in a function, under
``TYPE_CHECKING``), on this tree and on a copy with one cycle planted.
"""

from __future__ import annotations

import ast
import graphlib
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
        (
            "controller/metadata.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..worker import marker",
            "pytest_openenv.controller is not allowed to import pytest_openenv.worker",
        ),
    ],
    ids=["upward", "side-to-side", "envs-to-policies", "policies-to-envs", "type-checking"],
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


PACKAGE = "pytest_openenv"


def module_names(tree: Path) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package in ``tree``."""
    found = {}
    for path in sorted((tree / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(tree).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name ``module`` imports, absolute: a module, or what is imported from
    one (``pkg.mod.name``, which ``import_graph`` reads as ``pkg.mod``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    # every import is an edge, wherever it stands: one in a function, or one read only by
    # the type checker, closes a circle all the same
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names |= {f"{base}.{alias.name}" for alias in node.names}
    return names


def import_graph(tree: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. A name imported from a module counts as
    that module; ``from package import module`` as the module, not the package (a package
    is imported before its modules anyway, so that edge could close no circle of its own)."""
    modules = module_names(tree)
    graph = {}
    for module, path in modules.items():
        edges = set()
        for name in imported_names(module, path):
            while name not in modules and "." in name:
                name = name.rpartition(".")[0]
            if name in modules and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def import_cycle(tree: Path) -> list[str] | None:
    """One circle of imports between the package's modules, or None."""
    try:
        graphlib.TopologicalSorter(import_graph(tree)).prepare()
    except graphlib.CycleError as cycle:
        return list(cycle.args[1])
    return None


def test_no_two_modules_import_each_other() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 100 and "pytest_openenv.util.fetch" in graph
    assert "pytest_openenv._version" in graph["pytest_openenv.util.fetch"]
    assert import_cycle(ROOT) is None, " -> ".join(import_cycle(ROOT) or [])


@pytest.mark.parametrize(
    ("module", "planted", "circle"),
    [
        # a function-level import, and one read only by the type checker, close circles too
        ("policies/registry.py", "def _late():\n    from . import arms", {"registry", "arms"}),
        (
            "episode/spec.py",
            "if TYPE_CHECKING:\n    from .record import PlayedEpisode",
            {"spec", "record"},
        ),
    ],
    ids=["function-level", "type-checking"],
)
def test_a_planted_circle_of_imports_is_found(
    tmp_path: Path, module: str, planted: str, circle: set[str]
) -> None:
    shutil.copytree(
        ROOT / "pytest_openenv",
        tmp_path / "pytest_openenv",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    target = tmp_path / "pytest_openenv" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}  # noqa\n")
    found = import_cycle(tmp_path)
    assert found is not None
    assert {name.rpartition(".")[2] for name in found} >= circle
