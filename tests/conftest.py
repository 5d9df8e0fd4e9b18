"""Shared helpers for the suite: most tests drive pytest itself through pytester."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["pytester"]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line must be a whole JSON object: a torn line fails the test."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path} does not end with a newline"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


def assert_clean(result: pytest.RunResult) -> None:
    """No pytest internal error, whatever the outcome."""
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text, text[-4000:]
    assert "Traceback (most recent call last)" not in result.stderr.str(), result.stderr.str()


#: set in xdist workers; a child pytest that inherits them believes it is a worker too
#: (syrupy then skips its snapshot report and writes), so the child must not see them
XDIST_WORKER_VARS = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture
def run_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run pytest in a subprocess in the pytester folder; returns the RunResult."""
    for name in XDIST_WORKER_VARS:
        monkeypatch.delenv(name, raising=False)

    def run(*args: str, timeout: float = 300) -> pytest.RunResult:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=timeout)
        assert_clean(result)
        return result

    return run
