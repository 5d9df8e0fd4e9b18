"""``fixture_is_ours``: the one place that reads which fixture definition a test gets."""

from __future__ import annotations

import json

import pytest

#: records, for every collected item, which of the plugin's fixtures it gets unchanged
RECORDER = """
import json

from pytest_openenv.worker.fixtures import OWN_FIXTURES, fixture_is_ours


def pytest_collection_modifyitems(items):
    seen = {item.name: [fixture_is_ours(item, name) for name in OWN_FIXTURES] for item in items}
    with open("ours.json", "w") as out:
        json.dump(seen, out)
"""


def test_an_override_in_a_conftest_is_not_ours(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(
        test_plain="""
        def test_default(openenv_episode):
            pass
        """
    )
    overridden = pytester.mkpydir("overridden")
    (overridden / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef openenv_policy():\n    return lambda m, t: None\n"
    )
    (overridden / "test_override.py").write_text("def test_own(openenv_episode):\n    pass\n")
    pytester.runpytest(
        ".", "--collect-only", "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=1"
    )
    ours = json.loads((pytester.path / "ours.json").read_text())
    # the episode, env and policy fixtures: all the plugin's, or the policy overridden
    assert ours["test_default[ep-000000]"] == [True, True, True]
    assert ours["test_own[ep-000000]"] == [True, True, False]
