"""``openenv_episode`` finds its item through the setup hook, not through ``request``, and
the bundled run sets up no fixture of the plugins it leaves out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl

#: a conftest wrapping the plugin's fixture: each item must get its own item's episode
WRAPPER = """
import json
import pytest

@pytest.fixture
def openenv_episode(openenv_episode, request):
    with open(f"seen-{request.node.name}.json", "w") as out:
        json.dump(openenv_episode.episode_id, out)
    return openenv_episode

@pytest.fixture
def by_name(request):
    return request.getfixturevalue("openenv_episode")
"""

TESTS = """
def test_play(openenv_episode, by_name):
    assert by_name is openenv_episode
    assert openenv_episode.episode_id in __import__("os").environ["PYTEST_CURRENT_TEST"]
"""


@pytest.mark.parametrize("workers", [["-p", "no:xdist"], ["-n", "2"]], ids=["one", "xdist"])
def test_each_item_gets_its_own_episode_through_an_override_and_by_name(
    run_pytest, pytester: pytest.Pytester, workers: list[str]
) -> None:
    pytester.makeconftest(WRAPPER)
    pytester.makepyfile(test_wrapped=TESTS)
    result = run_pytest(
        "test_wrapped.py",
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=4",
        "--openenv-policy=expert",
        *workers,
    )
    result.assert_outcomes(passed=4)
    seen = {
        path.stem.removeprefix("seen-"): json.loads(path.read_text())
        for path in pytester.path.glob("seen-*.json")
    }
    assert seen == {f"test_play[ep-{i:06d}]": f"ep-{i:06d}" for i in range(4)}


def test_the_bundled_run_sets_up_only_the_episode_and_its_two_fixtures(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """No ``request`` (pytest builds it anew each time) and nothing of a left-out plugin
    (syrupy's autouse fixture, where syrupy has one)."""
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=2", "--setup-plan", "-p", "no:xdist"
    )
    used = [line for line in result.outlines if "openenv::test_episode[" in line]
    assert len(used) == 2
    for line in used:
        assert line.endswith("(fixtures used: openenv_env, openenv_episode, openenv_policy)"), line


#: a plugin standing for a left-out one: an autouse fixture, and what only it needs
IDLE_PLUGIN = """
import pytest

@pytest.fixture(scope="session")
def idle_dependency():
    return 1

@pytest.fixture(autouse=True)
def idle_autouse(request, idle_dependency):
    raise AssertionError("a left-out plugin's fixture was set up")
"""

PRUNING_CONFTEST = """
import json
import pytest
from pytest_openenv.worker.bundled import drop_left_out_fixtures

@pytest.fixture
def kept(request):
    return request.node.name

def pytest_collection_modifyitems(items):
    drop_left_out_fixtures(items[0], ("idle_plugin",))
    with open("closures.json", "w") as out:
        json.dump({item.name: list(item.fixturenames) for item in items}, out)
"""


@pytest.mark.parametrize(
    ("test", "closure"),
    [
        ("def test_one(kept):\n    assert kept == 'test_one'\n", ["kept", "request"]),
        ("def test_one():\n    pass\n", []),
    ],
    ids=["request-still-needed", "nothing-left"],
)
def test_a_left_out_plugins_fixtures_and_what_only_they_need_are_dropped(
    pytester: pytest.Pytester, test: str, closure: list[str]
) -> None:
    pytester.makepyfile(idle_plugin=IDLE_PLUGIN, test_pruned=test)
    pytester.makeconftest(PRUNING_CONFTEST)
    pytester.syspathinsert()
    result = pytester.runpytest_inprocess(
        "-p", "idle_plugin", "-p", "no:randomly", "-p", "no:xdist", "-p", "no:syrupy"
    )
    result.assert_outcomes(passed=1)
    closures = json.loads((pytester.path / "closures.json").read_text())
    assert sorted(closures["test_one"]) == closure


#: counts the episodes played, and the times pytest set up ``openenv_episode`` as a fixture
PLAY_PROBE = """
from pytest_openenv.worker.plugin import WorkerPlugin

counts = {"played": 0, "fixture setups": 0}
inner = WorkerPlugin.play

def play(self, item, env, policy):
    counts["played"] += 1
    return inner(self, item, env, policy)

WorkerPlugin.play = play

def pytest_fixture_setup(fixturedef):
    if fixturedef.argname == "openenv_episode":
        counts["fixture setups"] += 1

def pytest_sessionfinish(session):
    import json
    with open("counts.json", "w") as out:
        json.dump(counts, out)
"""

BUNDLED_RUN = (
    "--openenv-env=openspiel:tic_tac_toe",
    "-p",
    "play_probe",
    "-p",
    "no:xdist",
)


def played_rows(folder: Path) -> list[tuple[Any, ...]]:
    rows = [*read_jsonl(folder / "results.jsonl"), *read_jsonl(folder / "failures.jsonl")]
    return sorted(
        (row["episode_id"], row["reward"], row["messages"], row["passed"]) for row in rows
    )


def test_the_bundled_items_play_without_pytests_fixture_lookups_and_write_the_same_rows(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """Where a conftest adds a fixture of its own, pytest sets the episode up as before."""
    pytester.makepyfile(play_probe=PLAY_PROBE)
    pytester.syspathinsert()
    direct = run_pytest(
        *BUNDLED_RUN, "--openenv-n=5", "--openenv-policy=random", "--openenv-output=direct"
    )
    assert direct.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert json.loads((pytester.path / "counts.json").read_text()) == {
        "played": 5,
        "fixture setups": 0,
    }
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture(autouse=True)\ndef noted():\n    pass\n"
    )
    fixtures = run_pytest(
        *BUNDLED_RUN, "--openenv-n=5", "--openenv-policy=random", "--openenv-output=fixtures"
    )
    assert fixtures.ret == direct.ret
    assert json.loads((pytester.path / "counts.json").read_text()) == {
        "played": 5,
        "fixture setups": 5,
    }
    assert played_rows(pytester.path / "direct") == played_rows(pytester.path / "fixtures")
    assert len(played_rows(pytester.path / "direct")) == 5


def test_a_resumed_bundled_run_plays_only_the_episodes_it_does_not_have(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(play_probe=PLAY_PROBE)
    pytester.syspathinsert()
    run_pytest(*BUNDLED_RUN, "--openenv-n=3", "--openenv-policy=expert")
    resumed = run_pytest(
        *BUNDLED_RUN, "--openenv-n=5", "--openenv-policy=expert", "--openenv-resume"
    )
    resumed.assert_outcomes(passed=2, skipped=3)
    assert json.loads((pytester.path / "counts.json").read_text())["played"] == 2
