"""What a worker puts on an episode item's reports.

A failed episode that shows only its message: the same report, without the traceback walk.
A row made ahead by run-ahead: finished by one report, in its own form only.
"""

from __future__ import annotations

import json

import pytest

from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.record import PreparedRow
from pytest_openenv.episode.result import Episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import RandomPolicy
from pytest_openenv.worker.items import PREPARED_KEY
from pytest_openenv.worker.reporting import played_row

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


# -- a row made ahead (run-ahead) is finished by its item's report --------------------------
SPEC = EpisodeSpec(env="openspiel:tic_tac_toe", index=2, seed=7, policy="random")


def a_test_item(pytester: pytest.Pytester) -> pytest.Item:
    """A real collected item, in this process: pytester collects it between a session's start
    and finish hooks without running the session, which the session-end hooks of syrupy and
    of the plugin's controller side expect (the item's stash is all ``played_row`` uses)."""
    unloaded = ("-p", "no:syrupy", "-p", "no:openenv")
    module = pytester.getmodulecol("def test_func(): pass", configargs=unloaded)
    item = pytester.collect_by_name(module, "test_func")
    assert isinstance(item, pytest.Item)
    return item


@pytest.fixture(scope="module")
def played() -> Episode:
    family = build_family(SPEC.env, {}, ())
    return run_episode(SPEC, EnvFactory(family, ()), RandomPolicy())


@pytest.mark.parametrize("form", ["string", "object"])
def test_a_report_finishes_the_row_made_ahead_once(
    pytester: pytest.Pytester, played: Episode, form: str
) -> None:
    item = a_test_item(pytester)
    prepared = PreparedRow.of(played, item.nodeid, form)
    item.stash[PREPARED_KEY] = prepared
    row, used = played_row(item, played, played.passed, form)
    assert used is prepared
    assert prepared.line_of(row) is prepared.line
    assert row == played.record(test=item.nodeid, tool_arguments=form)
    # one report finishes it: a second row of the item is made anew
    assert PREPARED_KEY not in item.stash
    again, used = played_row(item, played, played.passed, form)
    assert used is None and again == row


def test_a_row_made_ahead_in_another_form_is_not_used(
    pytester: pytest.Pytester, played: Episode
) -> None:
    item = a_test_item(pytester)
    item.stash[PREPARED_KEY] = PreparedRow.of(played, item.nodeid, "object")
    row, used = played_row(item, played, played.passed, "string")
    assert used is None
    assert row == played.record(test=item.nodeid, tool_arguments="string")
    assert PREPARED_KEY not in item.stash
