"""The suite's own child pytest runs: which installed plugins they load (tests/conftest.py)."""

from __future__ import annotations

import pytest

IDLE = ("hypothesispytest", "anyio")


def loaded(pytester: pytest.Pytester) -> dict[str, bool]:
    config = pytester.parseconfigure("-p", "no:cacheprovider")
    return {name: config.pluginmanager.has_plugin(name) for name in IDLE}


@pytest.mark.slow
def test_a_child_run_leaves_the_idle_plugins_out(pytester: pytest.Pytester) -> None:
    assert loaded(pytester) == dict.fromkeys(IDLE, False)


@pytest.mark.every_plugin
def test_a_child_run_of_a_marked_test_loads_every_plugin(pytester: pytest.Pytester) -> None:
    assert loaded(pytester) == dict.fromkeys(IDLE, True)
