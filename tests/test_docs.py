"""README.md and docs/*.md say only what is true of the project.

The README stays a short newcomer's path that opens with CI's own command; every page's links
resolve (file and heading); every code block parses in its language, Python ones are
ruff-formatted; every ``--openenv-*`` option named exists and every option is in the options
reference. The README's own commands run (on 2 workers where it says 8) with the outcome, the
printed summary and the files it describes, and so does its first test file.
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import yaml
from helpers import SCRIPTED, read_jsonl
from markdown_it import MarkdownIt

from pytest_openenv.config.options import OPTIONS

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as pip vendors it
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 150
FIRST_TEST_FILE = "test_tic_tac_toe.py"


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def tokens_of(page: Path) -> list[Any]:
    return MarkdownIt("commonmark").enable("table").parse(page.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str

    def where(self) -> str:
        return f"{page_id(self.page)}:{self.line}"


def code_blocks(page: Path) -> list[Block]:
    return [
        Block(page, token.map[0] + 1, token.info.strip().split(" ")[0], token.content)
        for token in tokens_of(page)
        if token.type == "fence"
    ]


ALL_BLOCKS = [block for page in PAGES for block in code_blocks(page)]


def blocks_in(lang: str) -> list[Block]:
    return [block for block in ALL_BLOCKS if block.lang == lang]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    tokens = tokens_of(page)
    seen: dict[str, int] = {}
    found: set[str] = set()
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = "".join(child.content for child in tokens[i + 1].children or [])
        slug = github_slug(text)
        # a repeated heading gets -1, -2 ... on GitHub
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def links(page: Path) -> list[str]:
    hrefs: list[str] = []
    for token in tokens_of(page):
        for child in token.children or []:
            if child.type == "link_open":
                hrefs.append(str(child.attrs["href"]))
            elif child.type == "image":
                hrefs.append(str(child.attrs["src"]))
    return hrefs


# -- the README as a newcomer's path ---------------------------------------------------------


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_opens_with_the_headline_and_ci_commands() -> None:
    first = ALL_BLOCKS[0]
    assert first.page == README and first.lang == "bash"
    headline, tests = first.text.splitlines()
    assert headline.startswith("python -m pip install -q -e '.[openspiel]' && ")
    assert headline.endswith(
        "python -m pytest --openenv-env=openspiel:tic_tac_toe --openenv-n=200 -n 8"
    )
    ci_script = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci_script[-1] == tests, "the README's second command is what .ci/run runs"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / unquote(urlparse(h).path)).resolve() for h in links(README)}
    missing = [page_id(page) for page in PAGES[1:] if page.resolve() not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


# -- links ---------------------------------------------------------------------------------


def broken_links(page: Path, root: Path) -> list[str]:
    """Relative links of ``page`` whose file (inside ``root``) or heading does not exist."""
    broken: list[str] = []
    for href in links(page):
        parsed = urlparse(href)
        if parsed.scheme or href.startswith("//"):
            continue  # absolute URLs are not checked offline
        target = (page.parent / unquote(parsed.path)).resolve() if parsed.path else page
        if not target.exists() or not target.is_relative_to(root):
            broken.append(f"{href}: no such file")
        elif parsed.fragment and target.suffix == ".md" and parsed.fragment not in anchors(target):
            broken.append(f"{href}: no heading #{parsed.fragment}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_relative_links_resolve(page: Path) -> None:
    assert not broken_links(page, ROOT), f"{page_id(page)}: {broken_links(page, ROOT)}"


def test_the_link_checker_catches_a_missing_file_or_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Top `code`: here\n\n## Top `code`: here\n\n"
        "[a](#top-code-here) [b](#top-code-here-1) [c](#nope) [d](missing.md) [e](page.md#top)\n"
        "[f](https://example.com/x.md#nope)\n",
        encoding="utf-8",
    )
    assert anchors(page) == {"top-code-here", "top-code-here-1"}
    assert broken_links(page, tmp_path) == [
        "#nope: no heading #nope",
        "missing.md: no such file",
        "page.md#top: no heading #top",
    ]


# -- code blocks ---------------------------------------------------------------------------


def test_python_blocks_parse() -> None:
    for block in blocks_in("python"):
        try:
            ast.parse(block.text)
        except SyntaxError as exc:
            pytest.fail(f"{block.where()}: {exc}")


def test_python_blocks_are_ruff_formatted(tmp_path: Path) -> None:
    files = {}
    for i, block in enumerate(blocks_in("python")):
        path = tmp_path / f"block_{i}.py"
        path.write_text(block.text, encoding="utf-8")
        files[path.name] = block.where()
    assert files, "no Python block found"
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length=100", "--diff", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    unformatted = {where for name, where in files.items() if name in result.stdout}
    assert result.returncode == 0, f"not ruff-formatted: {sorted(unformatted)}\n{result.stdout}"


@pytest.mark.parametrize(
    ("lang", "load"),
    [
        ("toml", tomllib.loads),
        ("yaml", yaml.safe_load),
        ("json", json.loads),
        ("ini", lambda text: configparser.ConfigParser().read_string(text)),
        ("bash", lambda text: shlex.split(text, comments=True)),
    ],
)
def test_data_and_shell_blocks_parse(lang: str, load: Any) -> None:
    for block in blocks_in(lang):
        try:
            load(block.text)
        except Exception as exc:
            pytest.fail(f"{block.where()} is not valid {lang}: {exc}")


# -- options -------------------------------------------------------------------------------

KNOWN_FLAGS = {f"--openenv-{opt.flag}" for opt in OPTIONS}
PLACEHOLDER_FLAGS = {"--openenv-x-y"}  # "every --openenv-x-y has the ini key openenv_x_y"


def test_every_option_named_in_the_docs_exists() -> None:
    unknown = {
        f"{page_id(page)}: {flag}"
        for page in PAGES
        for flag in re.findall(r"--openenv-[a-z0-9-]*[a-z0-9]", page.read_text(encoding="utf-8"))
        if flag not in KNOWN_FLAGS | PLACEHOLDER_FLAGS
    }
    assert not unknown, sorted(unknown)


def test_every_option_is_in_the_options_reference() -> None:
    table = (DOCS / "options.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1] for line in table.splitlines() if line.startswith("| `--openenv-")}
    missing = sorted(f for f in KNOWN_FLAGS if not any(f"`{f}" in row for row in rows))
    assert not missing, f"options missing from docs/options.md: {missing}"


def test_ini_blocks_use_only_known_keys() -> None:
    known = {opt.dest for opt in OPTIONS}
    for block in blocks_in("ini"):
        parser = configparser.ConfigParser()
        parser.read_string(block.text)
        keys = {key for section in parser.sections() for key in parser[section]}
        unknown = {key for key in keys if key.startswith("openenv_") and key not in known}
        assert not unknown, f"{block.where()}: unknown ini keys {sorted(unknown)}"


# -- the README's commands run as it describes ------------------------------------------------


def readme_command(start: str) -> list[str]:
    """The words after ``start`` on the README's shell command line that begins with it."""
    for block in code_blocks(README):
        for line in block.text.splitlines() if block.lang == "bash" else ():
            if line.startswith(start):
                return shlex.split(line[len(start) :])
    raise AssertionError(f"README.md has no command line starting with {start!r}")


def on_two_workers(args: list[str]) -> list[str]:
    """This machine has two cores: ``-n 8`` becomes ``-n 2`` (the episodes are the same)."""
    return [*args[: args.index("-n") + 1], "2", *args[args.index("-n") + 2 :]]


def readme_files_table() -> set[str]:
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| file | holds |") :].split("\n\n")[0]
    return set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE))


def readme_headline_output() -> list[str]:
    """The README's sample ``openenv`` section, less the lines that vary from run to run."""
    for block in code_blocks(README):
        if block.lang == "" and "= openenv =" in block.text:
            volatile = ("wall time:", "output:")
            return [line for line in block.text.splitlines() if not line.startswith(volatile)]
    raise AssertionError("README.md shows no sample openenv section")


@pytest.mark.slow
def test_headline_keeps_every_episode_and_writes_the_files_listed(
    pytester: pytest.Pytester, run_pytest
) -> None:
    headline = readme_command("python -m pip install -q -e '.[openspiel]' && ")
    args = on_two_workers(headline[headline.index("pytest") + 1 :])
    assert not any(arg.startswith("--openenv-policy") for arg in args), "the default teacher"
    result = run_pytest(*args)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert result.parseoutcomes() == {"passed": 200}, "the expert never loses tic-tac-toe"
    printed = result.stdout.str().splitlines()
    for line in readme_headline_output():
        assert line in printed, f"the README shows {line!r}; the run printed:\n{printed[-30:]}"
    folder = pytester.path / "openenv-results"
    assert {p.name for p in folder.iterdir() if not p.name.startswith(".")} == readme_files_table()
    rows = read_jsonl(folder / "results.jsonl")
    assert len(rows) == 200 and {row["policy"] for row in rows} == {"expert"}
    assert read_jsonl(folder / "failures.jsonl") == []


@pytest.mark.slow
def test_the_first_legal_policy_loses_about_as_often_as_the_readme_says(
    pytester: pytest.Pytester, run_pytest
) -> None:
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=200", "-n", "2", SCRIPTED
    )
    outcomes = result.parseoutcomes()
    assert result.ret == 1, "a lost game fails its item, so the run exits 1"
    assert outcomes["passed"] + outcomes["failed"] == 200, outcomes
    assert 0.15 <= outcomes["failed"] / 200 <= 0.22, "the README says about 18% are lost"
    assert "about 18%" in README.read_text(encoding="utf-8")
    # the hint names the gate, and a stronger teacher that plays tic-tac-toe
    hint = [line for line in result.outlines if "so pytest exits 1" in line]
    assert len(hint) == 1 and "--openenv-policy=expert" in hint[0], hint


def first_test_file() -> str:
    for block in code_blocks(README):
        if block.lang == "python" and block.text.startswith(f"# {FIRST_TEST_FILE}\n"):
            return block.text
    raise AssertionError(f"README.md has no Python block starting with '# {FIRST_TEST_FILE}'")


@pytest.mark.slow
def test_readme_first_test_file_runs_as_described(pytester: pytest.Pytester, run_pytest) -> None:
    pytester.path.joinpath(FIRST_TEST_FILE).write_text(first_test_file(), encoding="utf-8")
    result = run_pytest(FIRST_TEST_FILE, *readme_command(f"pytest {FIRST_TEST_FILE} "), "-rf")
    outcomes = result.parseoutcomes()
    # the expert and the random games pass throughout; first-legal loses some of its 20
    assert outcomes["passed"] + outcomes["failed"] == 60, outcomes
    assert 0 < outcomes["failed"] < 20, outcomes
    failed_tests = set(re.findall(r"FAILED .*?::(\w+)\[", result.stdout.str()))
    assert failed_tests == {"test_first_legal_move_never_loses"}, result.stdout.str()[-3000:]
    assert "turn 1: play_move" in result.stdout.str(), "the failure shows episode.explain()"


def test_the_sft_example_quotes_openenv_s_tutorial_as_it_reports() -> None:
    """OpenEnv's SFT tutorial (Qwen3-1.7B on chain_sum) reports format compliance from
    about 0% to about 68% and accuracy from about 4% to about 68%: 64 is the accuracy's
    gain in points, not a format-compliance figure."""
    page = ROOT / "example_suites" / "sft_warmup" / "README.md"
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert "0% -> 64%" not in text
    assert "reports format compliance from about 0% to about 68%" in text
    assert "accuracy from about 4% to about 68%, a gain of 64 points" in text
