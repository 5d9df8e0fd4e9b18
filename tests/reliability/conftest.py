"""Fixtures of the fault-injection suite; the helpers live in ``faults.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import Launcher


@pytest.fixture
def launcher(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Launcher]:
    """Starts pytest runs in ``tmp_path/work``; whatever still runs is killed at teardown.

    Its runs leave out the idle plugins, as the suite's other child runs do, unless the test
    is marked ``every_plugin``.
    """
    folder = tmp_path / "work"
    folder.mkdir()
    every_plugin = request.node.get_closest_marker("every_plugin") is not None
    launch = Launcher(folder, addopts="") if every_plugin else Launcher(folder)
    try:
        yield launch
    finally:
        launch.close()
