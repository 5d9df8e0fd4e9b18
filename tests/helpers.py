"""Assertions shared by the suite (a module, not conftest: conftest names clash across folders)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: the first-legal teacher, which loses some tic-tac-toe games to the random opponent (the
#: default teacher, expert, never loses): for tests that need failed episodes
SCRIPTED = "--openenv-policy=scripted"

#: set in xdist workers; a child pytest that inherits them believes it is a worker too
#: (syrupy then skips its snapshot report and writes), so the child must not see them
XDIST_WORKER_VARS = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")

#: installed plugins a child run of the suite leaves out unless its test is marked
#: ``every_plugin`` (or names one with ``-p``): hypothesis' terminal summary imports all of
#: hypothesis and anyio's plugin imports trio (selenium's), about 1.2 s of CPU together in each
#: of the suite's ~1,000 child runs that use neither (measured with ``/usr/bin/time`` on a
#: one-test run); pytest-html with the metadata plugin it needs, pytest-rerunfailures and
#: platformdirs' plugin cost another 4-8% of a short child run, in every process of it;
#: pytest-benchmark, where a machine's image carries it, 7-10% of a one-test run
CHILD_RUN_IDLE_PLUGINS = (
    "-p no:hypothesispytest -p no:anyio -p no:html -p no:html_fixtures -p no:metadata"
    " -p no:rerunfailures -p no:platformdirs -p no:benchmark"
)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line must be a whole JSON object: a torn line fails the test."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path} does not end with a newline"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def played_rows(folder: Path) -> list[dict[str, Any]]:
    """Every row an output folder holds: the training split's, then the failures'."""
    return read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")


def assert_clean(result: pytest.RunResult) -> None:
    """No pytest internal error, whatever the outcome."""
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text[-4000:]
    assert "Traceback (most recent call last)" not in result.stderr.str(), result.stderr.str()


def collect_games(folder: Path, n: int, tool_arguments: str = "string") -> list[dict[str, Any]]:
    """``n`` tic-tac-toe games of the default teacher, collected by a real child run in
    ``folder`` with ``--openenv-tool-arguments``; its results.jsonl rows."""
    import subprocess
    import sys

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={n}",
            f"--openenv-tool-arguments={tool_arguments}",
            f"--openenv-output={folder / 'rows'}",
        ],
        cwd=folder,
        check=True,
        capture_output=True,
    )
    return read_jsonl(folder / "rows" / "results.jsonl")
