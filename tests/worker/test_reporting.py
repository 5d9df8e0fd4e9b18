"""A failed episode that shows only its message: the same report, without the traceback walk."""

from __future__ import annotations

import json

import pytest

#: counts pytest's traceback filtering per test (the walk the cheap path skips)
COUNTER = """
import json

import pytest
from _pytest.python import Function

walks = {}
_filter = Function._traceback_filter


def counting_filter(self, excinfo):
    walks[self.name] = walks.get(self.name, 0) + 1
    return _filter(self, excinfo)


Function._traceback_filter = counting_filter


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.when == "call" and report.failed:
        with open("reports.json", "a") as out:
            sections = [name for name, _ in report.sections]
            line = {"name": report.nodeid, "longrepr": str(report.longrepr), "sections": sections}
            out.write(json.dumps(line) + "\\n")


def pytest_unconfigure(config):
    with open("walks.json", "w") as out:
        json.dump(walks, out)
"""

TESTS = """
import pytest


@pytest.mark.openenv("openspiel:tic_tac_toe", n=1)
def test_episode_fails(episode):
    print("what the agent did")
    pytest.fail(f"lost episode {episode.episode_id}", pytrace=False)


def test_plain_fails():
    pytest.fail("a plain failure", pytrace=False)
"""


def run(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, int], list[dict]]:
    pytester.makeconftest(COUNTER)
    pytester.makepyfile(test_fails=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(failed=2)
    walks = json.loads((pytester.path / "walks.json").read_text())
    reports = [
        json.loads(line)
        for line in (pytester.path / "reports.json").read_text().split("\n")
        if line
    ]
    return walks, reports


def test_an_episode_s_message_only_failure_skips_the_walk(pytester: pytest.Pytester) -> None:
    walks, reports = run(pytester)
    assert "test_episode_fails[ep-000000]" not in walks
    assert walks["test_plain_fails"] == 1  # pytest's own path for other tests
    episode = next(r for r in reports if "episode" in r["name"])
    assert episode["longrepr"] == "lost episode ep-000000"  # the message, as pytest shows it
    assert "Captured stdout call" in episode["sections"]  # the rest of the report is kept


@pytest.mark.slow
def test_fulltrace_keeps_pytest_s_own_path(pytester: pytest.Pytester) -> None:
    _, reports = run(pytester, "--fulltrace")
    episode = next(r for r in reports if "episode" in r["name"])
    assert "test_fails.py" in episode["longrepr"]  # the traceback is shown
