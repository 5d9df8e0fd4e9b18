"""The bundled test's items: pytest finds the file and line of the test function once."""

from __future__ import annotations

import json

import pytest

#: counts pytest's look-ups of a test function's file and line, and keeps what each item's
#: location said against the location worked out afresh
#: a plugin (a conftest's item hooks would not reach the bundled test's items)
PROBE = """
import functools
import json

import pytest
from _pytest.python import Function

looked_up = []
_reportinfo = Function.reportinfo


def reportinfo(self):
    looked_up.append(self.nodeid)
    return _reportinfo(self)


Function.reportinfo = reportinfo
seen = {}


def pytest_runtest_logstart(nodeid, location):
    seen[nodeid] = list(location)


def pytest_sessionfinish(session):
    afresh = {
        item.nodeid: list(type(item).location.func(item))  # the cached_property's own work
        for item in session.items
    }
    with open("locations.json", "w") as out:
        json.dump({"looked_up": len(looked_up), "seen": seen, "afresh": afresh}, out)
"""


def test_every_bundled_item_has_its_own_location_and_the_file_is_found_once(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(location_probe=PROBE)
    result = run_pytest(
        "-p", "location_probe", "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=6"
    )
    result.assert_outcomes(passed=6)
    found = json.loads((pytester.path / "locations.json").read_text())
    # the sessionfinish recomputation looks up each item once more: 6 of its own
    assert found["looked_up"] - len(found["afresh"]) == 1
    assert found["seen"] == found["afresh"]
    names = [location[2] for location in found["seen"].values()]
    assert names == [f"test_episode[ep-{i:06d}]" for i in range(6)]
