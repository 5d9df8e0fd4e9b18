"""Print ``name==floor`` constraints for the lowest versions pyproject.toml declares.

Usage: python .ci/lowest_constraints.py [EXTRA ...] > lowest.txt

Every requirement of the core ``dependencies`` and of each named extra must have a
``>=`` floor: a requirement without one is a claim that cannot be checked, so it is an
error. The extras' self-references (``pytest-openenv[all]``) are skipped. Standard
library only (tomllib, or the same parser as pip vendors it on Python 3.10).
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
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*)(;.*)?$")
FLOOR = re.compile(r">=\s*([^,\s]+)")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def floors(pyproject: dict, extras: list[str]) -> dict[str, str]:
    project = pyproject["project"]
    own = normalize(project["name"])
    optional = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"no such extra in pyproject.toml: {unknown}; known: {sorted(optional)}")
    requirements = [*project["dependencies"], *(r for extra in extras for r in optional[extra])]
    found: dict[str, str] = {}
    for requirement in requirements:
        match = REQUIREMENT.match(requirement)
        if match is None:
            raise SystemExit(f"cannot read the requirement {requirement!r}")
        name, _extras, specifier, _marker = match.groups()
        if normalize(name) == own:
            continue
        floor = FLOOR.search(specifier)
        if floor is None:
            raise SystemExit(f"{requirement!r} declares no floor (>=)")
        found[normalize(name)] = floor.group(1)
    return found


def main(argv: list[str]) -> int:
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    for name, version in sorted(floors(pyproject, argv).items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
