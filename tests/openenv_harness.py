"""OpenEnv's own session factories for its openspiel and reasoning_gym envs, where they can be had.

``openenv collect`` builds its prompts in ``envs/openspiel_env/harness.py`` and
``envs/reasoning_gym_env/harness.py`` of OpenEnv's repository, which the ``openenv``
package on PyPI does not ship. They are imported as installed packages if they are,
else from an OpenEnv checkout: ``$OPENENV_REPO`` (a working tree or a bare git
directory), else the mirror this workplace keeps. The tests then call that code
itself instead of copying its strings.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

PACKAGE_FILES = ("__init__.py", "client.py", "models.py", "harness.py")


def repository() -> Path | None:
    """OpenEnv's repository (a clone or a bare mirror) named by ``OPENENV_REPO``, if any."""
    named = os.environ.get("OPENENV_REPO")
    return Path(named) if named and Path(named).exists() else None


def read_source(repo: Path, path: str) -> str | None:
    if (repo / path).is_file():  # a working tree
        return (repo / path).read_text(encoding="utf-8")
    shown = subprocess.run(
        ["git", f"--git-dir={repo}", "show", f"HEAD:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return shown.stdout if shown.returncode == 0 else None


def harness_module(package: str, scratch: Path) -> tuple[ModuleType | None, str]:
    """``{package}.harness`` (e.g. ``openspiel_env``) and where it came from, or None and why."""
    try:
        return importlib.import_module(f"{package}.harness"), "installed"
    except ImportError:
        pass
    repo = repository()
    if repo is None:
        return None, (
            f"{package} is not installed and no OpenEnv checkout was found: set OPENENV_REPO "
            "to a clone of github.com/huggingface/OpenEnv"
        )
    target = scratch / package
    target.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE_FILES:
        source = read_source(repo, f"envs/{package}/{name}")
        if source is None:
            return None, f"{repo} has no envs/{package}/{name}"
        (target / name).write_text(source, encoding="utf-8")
    sys.path.insert(0, str(scratch))
    try:
        module = importlib.import_module(f"{package}.harness")
    except ImportError as exc:
        return None, f"OpenEnv's {package} from {repo} does not import here: {exc}"
    return module, str(repo)
