"""Print the requirements of the package's core and of the named extras, one per line.

Usage: python .ci/requirements.py [EXTRA ...] > requirements.txt

The extras' self-references (``pytest-openenv[examples,train]``) are followed, so the list is
what ``pip install '.[EXTRA]'`` asks for besides the package itself. .ci/run installs it
while other jobs build and install the package from this tree: installing the requirements
needs no metadata build, which would write the tree's ``*.egg-info`` while they read it.
Standard library only (tomllib, or the same parser as pip vendors it on Python 3.10).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
SELF_REFERENCE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*\[([^\]]*)\]\s*$")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: dict, extras: list[str]) -> list[str]:
    project = pyproject["project"]
    own = normalize(project["name"])
    optional = project.get("optional-dependencies", {})
    found: list[str] = list(project["dependencies"])
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(
                f"no such extra in pyproject.toml: {extra!r}; known: {sorted(optional)}"
            )
        seen.add(extra)
        for requirement in optional[extra]:
            match = SELF_REFERENCE.match(requirement)
            if match and normalize(match.group(1)) == own:
                pending.extend(part.strip() for part in match.group(2).split(","))
            elif requirement not in found:
                found.append(requirement)
    return found


def main(argv: list[str]) -> int:
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    for requirement in requirements(pyproject, argv):
        print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
