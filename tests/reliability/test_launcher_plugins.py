"""The fault-injection runs load the plugins the suite's other child runs load."""

from __future__ import annotations

import pytest
from faults import Launcher

#: a test that prints which of the idle plugins its run loaded
PROBE = """
def test_probe(pytestconfig):
    names = ("hypothesispytest", "anyio")
    print("loaded:", [pytestconfig.pluginmanager.has_plugin(name) for name in names])
"""


def loaded(launcher: Launcher) -> str:
    (launcher.folder / "test_probe.py").write_text(PROBE)
    finished = launcher.run("-s", "test_probe.py")
    assert finished.returncode == 0, finished.text[-3000:]
    return next(line for line in finished.stdout.splitlines() if "loaded:" in line)


def test_a_launched_run_leaves_the_idle_plugins_out(launcher: Launcher) -> None:
    assert "loaded: [False, False]" in loaded(launcher)


@pytest.mark.every_plugin
@pytest.mark.slow
def test_a_launched_run_of_a_marked_test_loads_every_plugin(launcher: Launcher) -> None:
    assert "loaded: [True, True]" in loaded(launcher)
